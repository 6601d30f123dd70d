"""Simulation twin speed: one 5 Hz step (IK + 100 physics substeps) with one 128 x 128 render,
its parts, and the demonstration-data generation rate in transitions/s per core.

    python benchmarks/sim_step.py                      # MUJOCO_GL chosen as in the twin (egl, else osmesa)
    MUJOCO_GL=osmesa python benchmarks/sim_step.py --steps 300 --episodes 20
"""

from __future__ import annotations

import dataclasses
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import tyro

from robot_client.sim import require_mujoco


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """What to measure."""

    steps: int = 300  # timed env steps per measurement
    episodes: int = 20  # episodes for the data generation rate (0 skips it)
    workers: int = 1  # worker processes for the data generation rate
    seed: int = 0


def _stats(ms: list[float]) -> str:
    a = np.array(ms)
    return f"median {np.median(a):6.2f} ms  p90 {np.percentile(a, 90):6.2f} ms  mean {a.mean():6.2f} ms"


def _timed_steps(env, n: int, rng: np.random.Generator) -> tuple[list[float], list[float]]:
    """Random bounded actions with a reset every 30 steps; per-step wall times of step and render."""
    step_ms, render_ms = [], []
    env.reset(seed=int(rng.integers(1 << 30)))
    for i in range(n):
        if i and i % 30 == 0:
            env.reset(seed=int(rng.integers(1 << 30)))
        action = np.concatenate(
            [rng.uniform(-0.02, 0.02, 3), rng.uniform(-0.1, 0.1, 3), [float(i % 10 < 5)]]
        )
        t0 = time.perf_counter()
        env.step(action)
        t1 = time.perf_counter()
        env.render_observation()
        t2 = time.perf_counter()
        step_ms.append((t1 - t0) * 1e3)
        render_ms.append((t2 - t1) * 1e3)
    return step_ms, render_ms


def main(cfg: BenchConfig) -> None:
    """Print the figures recorded in docs/performance.md."""
    mujoco = require_mujoco()
    from robot_client.sim import SimConfig, WidowXSimEnv
    from robot_client.sim.datagen import DataGenConfig, generate

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"mujoco {mujoco.__version__}; MUJOCO_GL={os.environ['MUJOCO_GL']}"
    )
    rng = np.random.default_rng(cfg.seed)
    blind = WidowXSimEnv(seed=cfg.seed, config=SimConfig(render_observations=False))
    _timed_steps(blind, 20, rng)  # warm-up
    physics, render = _timed_steps(blind, cfg.steps, rng)
    full = WidowXSimEnv(seed=cfg.seed)
    _timed_steps(full, 20, rng)
    total, _ = _timed_steps(full, cfg.steps, rng)  # step() itself renders the 128 x 128 observation
    frame_ms = []
    for _ in range(50):
        t0 = time.perf_counter()
        full.render()
        frame_ms.append((time.perf_counter() - t0) * 1e3)
    print(f"step, IK + 100 physics substeps (no image):  {_stats(physics)}")
    print(f"128 x 128 observation (render + area resize): {_stats(render)}")
    print(f"step including the 128 x 128 observation:     {_stats(total)}")
    print(f"640 x 480 camera frame:                       {_stats(frame_ms)}")
    if cfg.episodes:
        with tempfile.TemporaryDirectory() as tmp:
            dcfg = DataGenConfig(
                out=Path(tmp) / "d", episodes=cfg.episodes, workers=cfg.workers, seed=cfg.seed
            )
            t0 = time.perf_counter()
            meta = generate(dcfg, progress=False)
            wall = time.perf_counter() - t0
        rate = meta["num_transitions"] / wall
        print(
            f"data generation: {meta['num_episodes']} episodes, {meta['num_transitions']} transitions "
            f"in {wall:.1f} s with {cfg.workers} worker(s): {rate:.0f} transitions/s, "
            f"{rate / cfg.workers:.0f} per worker (incl. start-up, compression, writing)"
        )


if __name__ == "__main__":
    main(tyro.cli(BenchConfig))
