"""Where MQE's pointmaze-giant-stitch episodes go: a one-off diagnostic for ogbench.md section 17.

    JAX_PLATFORMS=cpu python docs/results/ogbench-2026-11-29b/diagnostics/rollouts.py RUN_DIR OUT_DIR

Rolls out the deterministic policy of each seed of a (vmapped) run's latest checkpoint on the five
evaluation tasks (the evaluation's episode seeds, `--episodes` per task), records every episode's xy
path, and writes `rollouts.json` (per task and seed: successes, the cell each failed episode ended in
with its geodesic distance to the goal, the share of its last 200 steps spent in that cell, and the
critic's distance d(cell, goal) there and at the neighbouring cells, cell centres) and
`rollouts.png` (the paths over the maze map). Uses the project's own evaluation pieces.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import vmapped_run  # noqa: E402 - this folder's shared loader (the script's own folder is on sys.path)

from mqe_model.evaluation import episode_seed, make_env, reset_episode  # noqa: E402
from mqe_model.ogbench.distances import critic_distances, geodesic_cells, load_run  # noqa: E402

ENV = "pointmaze-giant-stitch-v0"


def rollout(env, task: int, seed: int, encode, policy, params) -> tuple[np.ndarray, bool]:
    """The episode's xy path and whether it succeeded."""
    observation, info = reset_episode(env, task, seed)
    code = encode(params, np.asarray(info["goal"], np.float32)[None])
    path, done = [np.asarray(observation[:2])], False
    while not done:
        action, _ = policy(params, np.asarray(observation, np.float32)[None], code)
        observation, _, terminated, truncated, info = env.step(np.asarray(action)[0])
        path.append(np.asarray(observation[:2]))
        done = terminated or truncated
    return np.array(path), bool(info["success"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--episodes", type=int, default=10)
    args = parser.parse_args()
    run = vmapped_run.load(args.run)
    metadata, encode, policy = run.metadata, run.encode, run.policy
    env = make_env(ENV)
    maze = env.unwrapped
    free, geo = geodesic_cells(maze.maze_map)
    index = {tuple(c): k for k, c in enumerate(free.tolist())}
    _, _, config, critic_params = load_run(args.run)
    cells = np.zeros((len(free), *metadata["observation"]["shape"]), np.float32)
    cells[:, :2] = [maze.ij_to_xy(tuple(c)) for c in free]

    def field_at(cell: tuple, goal: int, d: np.ndarray) -> dict:
        near = np.flatnonzero(geo[index[cell]] == 1)
        return {"critic_d": float(d[index[cell]]),
                "neighbours": [{"cell": free[n].tolist(), "geodesic_to_goal": float(geo[n, goal]),
                                "critic_d": float(d[n])} for n in near]}

    report, paths = {"env": ENV, "step": int(metadata["step"]), "episodes": args.episodes, "tasks": []}, {}
    for task in range(1, 6):
        info = maze.task_infos[task - 1]
        goal = index[tuple(info["goal_ij"])]
        fields = critic_distances(config, critic_params, cells, np.repeat(cells[goal][None], len(free), 0))
        entry = {"task": task, "start_cell": list(info["init_ij"]), "goal_cell": list(info["goal_ij"]),
                 "geodesic_cells": float(geo[index[tuple(info["init_ij"])], goal]), "seeds": []}
        for k, params in enumerate(run.seed_params):
            ends = collections.Counter()
            stuck, successes = [], 0
            for episode in range(args.episodes):
                path, success = rollout(env, task, episode_seed(metadata.get("train", {}).get("seed", 0), task, episode),
                                        encode, policy, params)
                paths[(task, k, episode)] = (path, success)
                successes += success
                if not success:
                    visited = [tuple(maze.xy_to_ij(xy)) for xy in path[-200:]]
                    ends[visited[-1]] += 1
                    stuck.append(visited.count(visited[-1]) / len(visited))
            entry["seeds"].append({
                "seed": k, "success": successes / args.episodes,
                "failed_end_cells": [{"cell": list(c), "episodes": n,
                                      "geodesic_to_goal": float(geo[index[c], goal]) if c in index else None,
                                      **(field_at(c, goal, fields[k]) if c in index else {})}
                                     for c, n in ends.most_common()],
                "failed_last200_share_in_end_cell": float(np.mean(stuck)) if stuck else None})
        report["tasks"].append(entry)
        print(json.dumps({k: v for k, v in entry.items() if k != "seeds"}),
              [(s["success"], [(c["cell"], c["episodes"], c["geodesic_to_goal"]) for c in s["failed_end_cells"][:2]])
               for s in entry["seeds"]], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rollouts.json").write_text(json.dumps(report, indent=1) + "\n")

    fig, axes = plt.subplots(1, 5, figsize=(25, 5))
    walls = np.asarray(maze.maze_map)
    for task, ax in zip(range(1, 6), axes, strict=True):
        for (i, j) in np.argwhere(walls == 1):
            x, y = maze.ij_to_xy((i, j))
            ax.add_patch(plt.Rectangle((x - 2, y - 2), 4, 4, color="0.6"))
        for (t, k, _), (path, success) in paths.items():
            if t == task and k == 0:
                ax.plot(path[:, 0], path[:, 1], color="tab:green" if success else "tab:red", lw=0.8, alpha=0.7)
        info = maze.task_infos[task - 1]
        for ij, marker in ((info["init_ij"], "o"), (info["goal_ij"], "*")):
            x, y = maze.ij_to_xy(ij)
            ax.plot(x, y, marker, color="k", ms=12)
        ax.set_title(f"task {task}, seed 0 (green: success, red: failure)")
        ax.set_aspect("equal")
        ax.autoscale()
    fig.tight_layout()
    fig.savefig(args.out / "rollouts.png", dpi=80)


if __name__ == "__main__":
    main()
