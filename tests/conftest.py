"""Suite-wide setup: JAX on the CPU (CI has no GPU), so results do not depend on the machine."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
