"""Data parallel on 2 (forced host) CPU devices: the same parameters as on one device."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from train_helpers import TMP, state_npz

SCRIPT = """
import sys, jax, numpy as np
from mqe_model import train
from mqe_model.parallel import DataParallel
from mqe_model.policy import load_policy
assert jax.device_count() == 2, jax.devices()
sharding = DataParallel().batch_sharding(1)
assert len(sharding.device_set) == 2
data, root = sys.argv[1], sys.argv[2]
leaves = []
for devices in ("1", "2"):
    workdir = f"{root}/dp{devices}"
    args = ["--agent", "mqe", "--preset", "tiny", "--data", data, "--workdir", workdir,
            "--steps", "20", "--updates-per-dispatch", "10", "--devices", devices, "--no-progress"]
    assert train.main(args) == 0
    leaves.append(jax.tree_util.tree_leaves(load_policy(workdir).params))
for a, b in zip(*leaves, strict=True):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5, rtol=1e-4)
print("same parameters on 1 and 2 devices")
"""


def test_two_devices_match_one():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu",
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    root = TMP / "dp"
    root.mkdir(exist_ok=True)
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(state_npz()), str(root)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "same parameters" in result.stdout
