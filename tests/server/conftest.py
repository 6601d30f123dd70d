"""Server test fixtures: tiny checkpoints (once per test run) and one shared server process."""

from __future__ import annotations

import pytest
from server_helpers import image_checkpoint, running_server, trained_state_checkpoint


@pytest.fixture(scope="session")
def state_ckpt():
    """Workdir of a tiny MQE checkpoint trained for 30 steps on states."""
    return trained_state_checkpoint()


@pytest.fixture(scope="session")
def image_ckpt():
    """Workdir of a tiny (untrained) MQE checkpoint on 32x32 images."""
    return image_checkpoint()


@pytest.fixture(scope="session")
def live_server(state_ckpt, image_ckpt):
    """A real `python -m server` with both policies ('img' the default), for the whole test run."""
    with running_server(["--policy", f"img={image_ckpt}", "--policy", f"state={state_ckpt}",
                         "--default-policy", "img", "--max-body-bytes", str(2**20)]) as server:
        yield server
