"""Shared by the server tests: tiny checkpoints built once per test run and a real server process."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np

from mqe_client import protocol

REPO = Path(__file__).resolve().parents[2]
TMP = Path(tempfile.mkdtemp(prefix="mqe-server-tests-"))
atexit.register(shutil.rmtree, TMP, ignore_errors=True)  # each test process's checkpoints and data go with it
CACHE = TMP / "jax-cache"  # one compilation cache for every process of the run: fast restarts
STATE_DIM, STATE_ACTION_DIM = 6, 3
IMAGE_SIZE = 32
BUCKETS = ("1", "2", "4", "8")


def write_state_npz(path: Path, episodes: int = 8, length: int = 40) -> Path:
    """An OGBench-style .npz of random-walk trajectories with 6-d states and 3-d actions."""
    rng = np.random.default_rng(0)
    n = episodes * length
    terminals = np.zeros(n, np.float32)
    terminals[length - 1 :: length] = 1.0
    np.savez(path, observations=np.cumsum(rng.normal(size=(n, STATE_DIM)), axis=0).astype(np.float32),
             actions=rng.uniform(-2.0, 3.0, size=(n, STATE_ACTION_DIM)).astype(np.float32),
             terminals=terminals)
    return path


@functools.cache
def trained_state_checkpoint() -> Path:
    """Workdir of a 30-step MQE run (tiny preset) trained here on a state dataset."""
    from mqe_model import train

    workdir = TMP / "run-state"
    args = ["--agent", "mqe", "--preset", "tiny", "--data", str(write_state_npz(TMP / "state.npz")),
            "--workdir", str(workdir), "--steps", "30", "--updates-per-dispatch", "10",
            "--log-every", "10", "--save-every", "50", "--no-progress", "--data-workers", "1"]
    assert train.main(args) == 0
    return workdir


@functools.cache
def image_checkpoint() -> Path:
    """Workdir of an untrained MQE checkpoint with a tiny IMPALA encoder on 32x32 images.

    Written through the checkpoint API (training an image model takes a minute on 2 cores; the
    protocol, preprocessing and batching do not care whether the weights were trained)."""
    from server.random_checkpoint import write_random_checkpoint

    workdir = TMP / "run-image"
    write_random_checkpoint(workdir, "mqe", "tiny", ("encoder=impala_tiny",), IMAGE_SIZE)
    return workdir


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`python -m server` as a child process on loopback."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = TMP / f"server-{self.port}.log"
        environ = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO), **(env or {})}
        self._log_file = open(self.log, "w")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "server", "--port", str(self.port), "--compilation-cache",
             str(CACHE), "--batch-buckets", *BUCKETS, *args],
            cwd=REPO, env=environ, stdout=self._log_file, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.process.poll() is None

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Until /healthz answers."""
        self._wait("/healthz", timeout)

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Until /readyz answers 200."""
        self._wait("/readyz", timeout)

    def _wait(self, path: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.alive(), f"server exited: {self.log.read_text()[-3000:]}"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + path, timeout=2).status_code == 200:
                    return
            time.sleep(0.1)
        raise TimeoutError(f"{path} not 200 after {timeout} s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        """Terminate (then kill) the process."""
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log_file.close()


@contextlib.contextmanager
def running_server(args: list[str], env: dict[str, str] | None = None,
                   ready: bool = True) -> Iterator[ServerProcess]:
    """A server process for the duration of the block, always stopped at the end."""
    server = ServerProcess(args, env)
    try:
        server.wait_ready() if ready else server.wait_healthy()
        yield server
    finally:
        server.stop()


def post(client: httpx.Client, path: str, body: dict, headers: dict[str, str] | None = None) -> httpx.Response:
    """POST a MessagePack body."""
    return client.post(path, content=protocol.packb(body),
                       headers={"Content-Type": protocol.CONTENT_TYPE, **(headers or {})})


def decoded(response: httpx.Response) -> dict:
    """The MessagePack or JSON body of an answer."""
    if response.headers.get("content-type", "").startswith(protocol.CONTENT_TYPE):
        return protocol.unpackb(response.content)
    return response.json()
