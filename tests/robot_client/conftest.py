"""Fixtures for the robot client tests: protocol-speaking server processes on loopback."""

from __future__ import annotations

import pytest
from client_helpers import ServerProcess, free_port

from robot_client.sim import select_gl_backend

select_gl_backend()  # before anything imports mujoco: headless EGL or OSMesa, never GLFW


@pytest.fixture
def mock_server():
    """Factory: mock_server("--mode", "nan") starts a server process; all are killed afterwards."""
    started: list[ServerProcess] = []

    def make(*args: str) -> ServerProcess:
        server = ServerProcess(free_port(), *args).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.kill()
