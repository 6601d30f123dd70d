"""Suite-wide setup: JAX on the CPU (CI has no GPU), so results do not depend on the machine.

The tests' programs are tiny and most of their time is compilation, so XLA's CPU backend skips
LLVM's optimization passes here (1.5x faster on the compile-bound tests, measured on two cores);
the tests' subprocesses (`mqe-train`, the server, benchmarks) inherit the setting. A test bound by
running compiled code starts its subprocess with `optimized_xla_env` instead.
"""

import os

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
XLA_FLAGS_GIVEN = os.environ.get("XLA_FLAGS", "")
if "xla_backend_optimization_level" not in XLA_FLAGS_GIVEN:
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [XLA_FLAGS_GIVEN, "--xla_backend_optimization_level=0"]))


@pytest.fixture
def optimized_xla_env() -> dict[str, str]:
    """The environment for a subprocess, with XLA_FLAGS as they were before this file changed them."""
    return dict(os.environ, XLA_FLAGS=XLA_FLAGS_GIVEN)
