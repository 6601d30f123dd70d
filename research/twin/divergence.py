"""Does the MQE backup drive distances between episodes that never meet to infinity?

The twin's primitive episodes each start from their own random scene, so no episode's state is ever
another's: the goals of other episodes are unreachable in the data and the backup's fixed point for
them, d = d(s^w, g) + k' steps, has no finite solution. On the twin (`sim`, 64 x 64 images, one H100)
the critic's mean all-pairs distance grew from 2.3 (5k updates) to 166 (60k), and at ~65k its goal
embeddings collapsed (spread 4e7 -> 67, every distance ~0.35).

This script runs the mechanism at CPU scale, state-based (the `tiny` preset, gamma 0.98 as `sim`):
- `disconnected`: episodes of 36 steps, each in its own scene (a fixed random 4-d vector in its
  observation) moving a 2-d point from a random start to a random end: the twin's structure;
- `connected`: the same, every episode in one scene with starts and ends on a 3 x 3 grid, so
  episodes meet (as play data such as OGBench's does).
Decision rule (fixed before the run): the mechanism holds if `disconnected`'s all-pairs distance at
the last step is >= 5x its value at the first logged step while `connected`'s stays within 2x.

    python research/twin/divergence.py --out /tmp/divergence --steps 20000
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import tyro

LENGTH = 36  # steps per episode, about the twin's primitive episodes
SCENE_DIM = 4  # dimensions of the per-episode scene vector
GAMMA = 0.98  # the `sim` preset's discount


@dataclasses.dataclass(frozen=True)
class Args:
    out: Path  # working directory (datasets, runs)
    steps: int = 20_000  # updates per run
    episodes: int = 1000  # episodes per dataset
    log_every: int = 1000  # updates between metric lines


def make_dataset(path: Path, episodes: int, connected: bool, seed: int = 0) -> Path:
    """An OGBench-style .npz: observations [scene (4), point (2)], actions the point's noisy steps."""
    rng = np.random.default_rng(seed)
    grid = np.stack(np.meshgrid(*[np.linspace(-1, 1, 3)] * 2), -1).reshape(-1, 2)
    observations, actions = [], []
    for _ in range(episodes):
        scene = np.zeros(SCENE_DIM) if connected else rng.normal(size=SCENE_DIM)
        start, end = (grid[rng.choice(len(grid), 2, replace=False)] if connected
                      else rng.uniform(-1, 1, size=(2, 2)))
        step = (end - start) / (LENGTH - 1)
        moves = step + rng.normal(scale=0.2 * np.abs(step).max() + 1e-3, size=(LENGTH, 2))
        points = start + np.concatenate([np.zeros((1, 2)), np.cumsum(moves[:-1], axis=0)])
        observations.append(np.concatenate([np.broadcast_to(scene, (LENGTH, SCENE_DIM)), points], axis=1))
        actions.append(np.clip(moves / (np.abs(step).max() * 2 + 1e-3), -1, 1))
    terminals = np.zeros(episodes * LENGTH, np.float32)
    terminals[LENGTH - 1 :: LENGTH] = 1.0
    np.savez(path, observations=np.concatenate(observations).astype(np.float32),
             actions=np.concatenate(actions).astype(np.float32), terminals=terminals)
    return path


def train(args: Args, name: str, data: Path) -> list[dict]:
    workdir = args.out / name
    subprocess.run(
        [sys.executable, "-m", "mqe_model.train", "--agent", "mqe", "--preset", "tiny", "--data", str(data),
         "--workdir", str(workdir), "--steps", str(args.steps), "--seed", "0", "--log-every",
         str(args.log_every), "--save-every", str(args.steps), "--no-progress", "--overwrite",
         "--set", f"gamma={GAMMA}", "p_next=0.1"],
        check=True, stdout=subprocess.DEVNULL)
    return [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]


def main(args: Args) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    disconnected = make_dataset(args.out / "disconnected.npz", args.episodes, connected=False)
    connected = make_dataset(args.out / "connected.npz", args.episodes, connected=True)
    runs = {
        "disconnected": train(args, "disconnected", disconnected),
        "connected": train(args, "connected", connected),
    }
    print("| run | step | all-pairs d (steps) | positive d (steps) | goal spread (sq) |")
    print("| --- | --- | --- | --- | --- |")
    scale = -np.log(GAMMA)
    growth = {}
    for name, lines in runs.items():
        for line in lines:
            print(f"| {name} | {line['step']} | {line['critic/dist_all'] / scale:.1f} | "
                  f"{line['critic/positive_steps']:.1f} | {line['critic/latent_spread_sq']:.3g} |")
        growth[name] = lines[-1]["critic/dist_all"] / lines[0]["critic/dist_all"]
    holds = growth["disconnected"] >= 5 and growth["connected"] <= 2
    print(f"growth first -> last: {', '.join(f'{k} x{v:.2f}' for k, v in growth.items())}; "
          f"mechanism {'holds' if holds else 'does not hold'} by the rule")


if __name__ == "__main__":
    main(tyro.cli(Args))
