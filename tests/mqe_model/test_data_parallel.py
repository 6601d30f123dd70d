"""Data parallel on 2 (forced host) CPU devices: the same parameters as on one device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
from train_helpers import TMP, state_npz

from server.demo import free_port

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


def test_a_two_device_checkpoint_serves_from_one_device():
    workdir = TMP / "dp" / "dp2"
    if not workdir.exists():
        test_two_devices_match_one()
    code = (
        "import sys, jax, numpy as np; from mqe_model.policy import load_policy; "
        "p = load_policy(sys.argv[1]); assert jax.device_count() == 1; "
        "obs = np.zeros((2, 6), np.float32); a, d = p.act_fn(p.params, obs, obs); "
        "assert a.shape == (2, 3) and np.all(np.isfinite(d))"
    )
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    env.pop("XLA_FLAGS", None)
    result = subprocess.run([sys.executable, "-c", code, str(workdir)], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]


GATHER_SCRIPT = """
import jax, numpy as np
from jax.sharding import NamedSharding, PartitionSpec
from mqe_model.parallel import DataParallel, replicated_in_mesh
from mqe_model.quasimetric import mrn_pairwise
mesh = DataParallel().mesh
rows = jax.device_put(np.random.default_rng(0).normal(size=(2, 16, 64)).astype(np.float32),
                      NamedSharding(mesh, PartitionSpec(None, "data")))
assert not jax.jit(replicated_in_mesh)(rows).sharding.is_fully_replicated  # no mesh: unchanged
with jax.set_mesh(mesh):
    assert jax.jit(replicated_in_mesh)(rows).sharding.is_fully_replicated
    hlo = jax.jit(jax.grad(lambda x: mrn_pairwise(x, x).sum())).lower(rows).compile().as_text()
gathers = sum(" all-gather(" in line or " all-gather-start(" in line for line in hlo.splitlines())
print("all-gathers", gathers)
"""


def test_pairwise_gathers_the_other_side_once_per_pass():
    """On 2 devices, all pairs of a batch-sharded set need the whole set: one gather, not one per slice."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu",
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    result = subprocess.run([sys.executable, "-c", GATHER_SCRIPT], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    gathers = int(result.stdout.split("all-gathers")[-1])
    assert 1 <= gathers <= 2, result.stdout


def test_two_processes_train_one_run_through_jax_distributed():
    """Multi-host as a cluster runs it: the same mqe-train command in 2 processes (1 CPU device each,
    gloo collectives), coordinated by the JAX_* variables; one run, written once."""
    workdir = TMP / "multi-process"
    port = free_port()
    processes = []
    for index in range(2):
        env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo",
                   JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(index),
                   PYTHONPATH=str(Path(__file__).resolve().parents[2]))
        env.pop("XLA_FLAGS", None)
        args = ["--agent", "mqe", "--preset", "tiny", "--data", str(state_npz()), "--workdir", str(workdir),
                "--steps", "20", "--updates-per-dispatch", "10", "--log-every", "10", "--save-every", "10",
                "--no-progress", "--data-workers", "1"]
        processes.append(subprocess.Popen([sys.executable, "-m", "mqe_model.train", *args], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = []
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=240))
    finally:
        for process in processes:
            process.kill()
    for process, (_, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err[-3000:]
    assert "on 2 device(s)" in outputs[0][1]  # the global mesh spans both processes
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [10, 20]  # process 0 alone writes metrics
    from mqe_model.policy import load_policy

    policy = load_policy(workdir)
    assert policy.step == 20
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(policy.params))


def test_a_coordinator_without_a_process_count_is_one_line_and_exit_2():
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_COORDINATOR_ADDRESS="127.0.0.1:1", JAX_PROCESS_ID="0",
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    env.pop("JAX_NUM_PROCESSES", None)
    result = subprocess.run([sys.executable, "-m", "mqe_model.train", "--agent", "mqe", "--preset", "tiny",
                             "--data", str(state_npz()), "--workdir", str(TMP / "no-count")], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    error = [line for line in result.stderr.splitlines() if line.startswith("mqe-train: error:")]
    assert len(error) == 1 and "JAX_NUM_PROCESSES" in error[0]
    assert not (TMP / "no-count").exists()
