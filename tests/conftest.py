"""Suite-wide setup: JAX on the CPU (CI has no GPU), so results do not depend on the machine.

The tests' programs are tiny and most of their time is compilation, so XLA's CPU backend skips
LLVM's optimization passes here (1.5x faster on the compile-bound tests, measured on two cores);
the tests' subprocesses (`mqe-train`, the server, benchmarks) inherit the setting.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"), "--xla_backend_optimization_level=0"]))
