"""Fixtures of the twin's tests: one headless env per test run (building it takes ~0.1 s)."""

import pytest

from robot_client.sim import select_gl_backend

select_gl_backend()  # egl where libEGL exists, else osmesa; before anything imports mujoco
pytest.importorskip("mujoco", reason="mujoco not installed: pip install 'mqe-deploy[sim]'")


@pytest.fixture(scope="session")
def env():
    from robot_client.sim import WidowXSimEnv

    e = WidowXSimEnv(task="double_pnp", seed=0)
    yield e
    e.close()
