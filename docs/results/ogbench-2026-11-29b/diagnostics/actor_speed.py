"""How fast MQE's actor moves towards near and far goals on pointmaze-giant-stitch: ogbench.md section 18.

    JAX_PLATFORMS=cpu python docs/results/ogbench-2026-11-29b/diagnostics/actor_speed.py RUN OUT

For `--pairs` random (cell, goal cell) pairs of the maze's free cells, at the cell centres, the
actor's action of each seed (the latest checkpoint of a vmapped run): its length (L2 norm,
environment units; the data's actions have length ~0.96) and its cosine with the shortest-path
direction (towards the centre of the next cell on a shortest path), binned by the goal's geodesic
distance in cells. Writes `actor_speed.json`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import vmapped_run  # this folder's shared loader (the script's own folder is on sys.path)

from mqe_model.evaluation import make_env
from mqe_model.ogbench.distances import geodesic_cells

ENV = "pointmaze-giant-stitch-v0"
BINS = ((1, 1), (2, 3), (4, 6), (7, 12), (13, 20), (21, 60))  # geodesic cells, inclusive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--pairs", type=int, default=4000)
    args = parser.parse_args()
    run = vmapped_run.load(args.run)
    metadata, encode, policy = run.metadata, run.encode, run.policy
    maze = make_env(ENV).unwrapped
    free, geo = geodesic_cells(maze.maze_map)
    rng = np.random.default_rng(0)
    starts, goals = rng.integers(0, len(free), args.pairs), rng.integers(0, len(free), args.pairs)
    keep = (geo[starts, goals] > 0) & np.isfinite(geo[starts, goals])
    starts, goals = starts[keep], goals[keep]
    centre = np.array([maze.ij_to_xy(tuple(c)) for c in free], np.float32)
    obs = np.zeros((len(starts), *metadata["observation"]["shape"]), np.float32)
    obs[:, :2] = centre[starts]
    goal_obs = np.zeros_like(obs)
    goal_obs[:, :2] = centre[goals]
    nxt = np.array([min(np.flatnonzero(geo[s] == 1), key=lambda n, g=g: geo[n, g]) for s, g in zip(starts, goals, strict=True)])
    way = centre[nxt] - centre[starts]
    way /= np.linalg.norm(way, axis=1, keepdims=True)
    distance = geo[starts, goals]
    report = {"env": ENV, "step": int(metadata["step"]), "pairs": int(len(starts)), "bins": []}
    lengths, cosines = [], []
    for params in run.seed_params:
        actions = np.asarray(policy(params, obs, encode(params, goal_obs))[0])
        norm = np.linalg.norm(actions, axis=1)
        lengths.append(norm)
        cosines.append(np.sum(actions * way, axis=1) / np.maximum(norm, 1e-9))
    lengths, cosines = np.stack(lengths), np.stack(cosines)  # (seeds, pairs)
    for low, high in BINS:
        inside = (distance >= low) & (distance <= high)
        report["bins"].append({"geodesic_cells": [low, high], "pairs": int(inside.sum()),
                               "mean_length_per_seed": lengths[:, inside].mean(axis=1).round(3).tolist(),
                               "mean_cosine_per_seed": cosines[:, inside].mean(axis=1).round(3).tolist()})
        print(f"{low:2d}-{high:2d} cells ({inside.sum():4d} pairs): length "
              f"{lengths[:, inside].mean():.3f}, cosine to the shortest path {cosines[:, inside].mean():.3f}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "actor_speed.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
