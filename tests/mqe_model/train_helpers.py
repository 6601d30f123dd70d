"""Tiny datasets and runs shared by the training-pipeline tests (built once per test process)."""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from mqe_model import train

TMP = Path(tempfile.mkdtemp(prefix="mqe-train-tests-"))
atexit.register(shutil.rmtree, TMP, ignore_errors=True)  # each test process's checkpoints and data go with it


def write_state_npz(path: Path, episodes: int = 8, length: int = 40, obs_dim: int = 6,
                    action_dim: int = 3, seed: int = 0) -> Path:
    """An OGBench-style .npz of random-walk trajectories."""
    rng = np.random.default_rng(seed)
    n = episodes * length
    actions = rng.uniform(-2.0, 3.0, size=(n, action_dim)).astype(np.float32)
    observations = np.cumsum(rng.normal(size=(n, obs_dim)), axis=0).astype(np.float32)
    terminals = np.zeros(n, np.float32)
    terminals[length - 1 :: length] = 1.0
    np.savez(path, observations=observations, actions=actions, terminals=terminals)
    return path


def write_image_dataset(root: Path, episodes: int = 4, length: int = 12, size: int = 32,
                        action_dim: int = 7) -> Path:
    """A canonical dataset directory with uint8 images (docs/dataset_format.md)."""
    rng = np.random.default_rng(1)
    root.mkdir(parents=True, exist_ok=True)
    n = episodes * length
    terminals = np.zeros(n, bool)
    terminals[length - 1 :: length] = True
    np.savez(root / "shard-00000.npz",
             observations=rng.integers(0, 256, size=(n, size, size, 3), dtype=np.uint8),
             actions=rng.normal(size=(n, action_dim)).astype(np.float32), terminals=terminals)
    (root / "dataset.json").write_text(json.dumps({
        "format": "mqe-canonical", "version": 1,
        "observation": {"kind": "image", "shape": [size, size, 3], "dtype": "uint8"},
        "action_dim": action_dim}))
    return root


@functools.cache
def state_npz() -> Path:
    """The shared state dataset."""
    return write_state_npz(TMP / "state.npz")


def run_args(workdir: Path, data: Path, agent: str = "mqe", steps: int = 30, *extra: str) -> list[str]:
    """Command line of a quick tiny run."""
    return ["--agent", agent, "--preset", "tiny", "--data", str(data), "--workdir", str(workdir),
            "--steps", str(steps), "--updates-per-dispatch", "10", "--log-every", "10",
            "--save-every", "50", "--no-progress", "--data-workers", "1", *extra]


@functools.cache
def tiny_run(agent: str) -> Path:
    """Workdir of a finished 30-step tiny run of `agent` on the state dataset."""
    workdir = TMP / f"run-{agent}"
    assert train.main(run_args(workdir, state_npz(), agent)) == 0
    return workdir
