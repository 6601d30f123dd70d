"""Suite-wide setup: JAX on the CPU (CI has no GPU), so results do not depend on the machine.

The tests' programs are tiny and most of their time is compilation, so XLA's CPU backend skips
LLVM's optimization passes here (1.5x faster on the compile-bound tests, measured on two cores);
the tests' subprocesses (`mqe-train`, the server, benchmarks) inherit the setting.

They also share one persistent JAX compilation cache for the run: the evaluation workers, trainers
and servers that the tests start as processes compile the same tiny programs again and again, and
read them from the cache instead. It lives in a temporary folder that the run's controller makes
before the xdist workers start (they and their subprocesses inherit its path) and removes at the end.
A test that sets its own cache (the server's `--compilation-cache`) still gets its own.
Decoded RLDS and LeRobot data (`mqe_model.data.stream`) go to a temporary folder made the same way,
never to the user's ~/.cache.
"""

import os
import shutil
import tempfile

import pytest
from client_helpers import ServerProcess, free_port

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"), "--xla_backend_optimization_level=0"]))

_CACHE_OWNER = "MQE_TESTS_JAX_CACHE_OWNER"  # set to the controller's pid where it made the cache
_DATA_CACHE_OWNER = "MQE_TESTS_DATA_CACHE_OWNER"  # the same for the decoded-data cache


def pytest_configure(config):
    if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
        os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="mqe-tests-jax-cache-")
        os.environ[_CACHE_OWNER] = str(os.getpid())
        # the tests' programs compile in well under JAX's default threshold of 1 s: cache them all
        os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    if "MQE_DATA_CACHE" not in os.environ:
        os.environ["MQE_DATA_CACHE"] = tempfile.mkdtemp(prefix="mqe-tests-data-cache-")
        os.environ[_DATA_CACHE_OWNER] = str(os.getpid())


def pytest_unconfigure(config):
    if os.environ.get(_CACHE_OWNER) == str(os.getpid()):
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
    if os.environ.get(_DATA_CACHE_OWNER) == str(os.getpid()):
        shutil.rmtree(os.environ["MQE_DATA_CACHE"], ignore_errors=True)


@pytest.fixture
def mock_server():
    """Factory: mock_server("--mode", "nan") starts a mock policy server process; all are killed afterwards."""
    started: list[ServerProcess] = []

    def make(*args: str) -> ServerProcess:
        server = ServerProcess(free_port(), *args).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.kill()
