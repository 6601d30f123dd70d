"""Helpers of the robot client tests: free ports and mock server processes on loopback."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`python -m mqe_client.mock_server` in its own process, killable and restartable."""

    def __init__(self, port: int, *args: str):
        self.port, self.args = port, args
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> ServerProcess:
        """Start and wait until /healthz answers."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mqe_client.mock_server", "--port", str(self.port), *self.args],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        end = time.monotonic() + 15
        while time.monotonic() < end:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=0.2).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("mock server did not start")

    def kill(self) -> None:
        """SIGKILL, as a crashed server."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
