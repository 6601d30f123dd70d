"""Does the stitch critic see through walls? A one-off diagnostic for ogbench.md section 19.

    JAX_PLATFORMS=cpu python docs/results/ogbench-2026-11-29g/diagnostics/wall_leak.py RUN_DIR OUT_DIR

For every ordered pair of free cells of pointmaze-giant (cell centres, zero velocity), each seed's
critic distance d(cell, goal cell) of a (vmapped) MQE run's latest checkpoint. Among pairs with the
same maze geodesic, a critic that measured only the maze would not care how close the two cells lie
in the plane; one that learned partly from the plane gives wall-separated pairs (a long detour
between cells a short straight line apart) smaller distances. Writes `wall_leak.json`:
- per geodesic (pairs exactly that many cells apart in the maze) and seed: the Spearman correlation
  of d with the straight-line distance, and the mean d of the pairs nearer in the plane than the
  median against the rest; pooled over geodesics, weighted by pairs;
- per evaluation task and seed: d(cell, goal) along the task's shortest route, start to goal, with
  the places where it rises although the route gets nearer (the critic's field pointing backwards);
and `wall_leak.png`, d against the geodesic for pairs near and far in the plane, and the routes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from mqe_model.evaluation import make_env  # noqa: E402
from mqe_model.ogbench.distances import critic_distances, geodesic_cells, load_run  # noqa: E402

ENV = "pointmaze-giant-stitch-v0"
MIN_PAIRS = 40  # pairs of one geodesic needed to rank them


def shortest_route(geo: np.ndarray, start: int, goal: int) -> list[int]:
    """Cell indices of one shortest route from start to goal (each step one cell nearer the goal)."""
    route = [start]
    while route[-1] != goal:
        here = route[-1]
        nearer = np.flatnonzero((geo[here] == 1) & (geo[:, goal] == geo[here, goal] - 1))
        route.append(int(nearer[0]))
    return route


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    _, metadata, config, critic_params = load_run(args.run)
    maze = make_env(ENV).unwrapped
    free, geo = geodesic_cells(maze.maze_map)
    n = len(free)
    cells = np.zeros((n, *metadata["observation"]["shape"]), np.float32)
    cells[:, :2] = [maze.ij_to_xy(tuple(c)) for c in free]
    src, dst = (a.reshape(-1) for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    keep = src != dst
    src, dst = src[keep], dst[keep]
    d = critic_distances(config, critic_params, cells[src], cells[dst])  # (seeds, pairs)
    g = geo[src, dst]
    plane = np.linalg.norm(free[src] - free[dst], axis=1)  # straight line, in cells

    by_geodesic = []  # pairs of one exact geodesic, so that the plane is the only thing that varies
    for cells_apart in range(2, int(g.max()) + 1):
        rows = np.flatnonzero(g == cells_apart)
        if len(rows) < MIN_PAIRS:
            continue
        near = rows[plane[rows] <= np.median(plane[rows])]
        far = rows[plane[rows] > np.median(plane[rows])]
        if len(far) == 0:
            continue
        by_geodesic.append({
            "geodesic_cells": cells_apart, "pairs": int(len(rows)),
            "plane_cells_near_far_halves": [float(plane[near].mean()), float(plane[far].mean())],
            "seeds": [{"spearman_d_plane": float(stats.spearmanr(ds[rows], plane[rows])[0]),
                       "mean_d_near_half": float(ds[near].mean()), "mean_d_far_half": float(ds[far].mean())}
                      for ds in d]})
    weights = np.array([b["pairs"] for b in by_geodesic], float)
    pooled = [{"spearman_d_plane": float(np.average([b["seeds"][k]["spearman_d_plane"] for b in by_geodesic],
                                                    weights=weights)),
               "d_near_over_far": float(np.average([b["seeds"][k]["mean_d_near_half"] / b["seeds"][k]["mean_d_far_half"]
                                                    for b in by_geodesic], weights=weights))}
              for k in range(len(d))]

    index = {tuple(c): k for k, c in enumerate(free.tolist())}
    pair_index = {(s, t): k for k, (s, t) in enumerate(zip(src.tolist(), dst.tolist(), strict=True))}
    tasks = []
    for task, info in enumerate(maze.task_infos, start=1):
        start, goal = index[tuple(info["init_ij"])], index[tuple(info["goal_ij"])]
        route = shortest_route(geo, start, goal)
        along = [[float(ds[pair_index[(c, goal)]]) if c != goal else 0.0 for c in route] for ds in d]
        tasks.append({
            "task": task, "route": [free[c].tolist() for c in route],
            "seeds": [{"d_along_route": profile,
                       "rises": [{"at_step": k, "cell": free[route[k]].tolist(), "from_d": profile[k - 1],
                                  "to_d": profile[k]} for k in range(1, len(route)) if profile[k] > profile[k - 1]],
                       "min_d_off_goal": min(profile[:-1]), "min_d_at_step": int(np.argmin(profile[:-1]))}
                      for profile in along]})

    report = {"env": ENV, "step": int(metadata["step"]), "cells": n, "pairs": int(len(g)),
              "d_units": "critic distance (-log(gamma) = 0.005 per step at its fixed point)",
              "pooled_over_geodesics": pooled, "by_geodesic": by_geodesic, "tasks": tasks}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "wall_leak.json").write_text(json.dumps(report, indent=1) + "\n")
    for b in by_geodesic:
        print("geodesic", b["geodesic_cells"], "pairs", b["pairs"], "plane near/far",
              [round(x, 1) for x in b["plane_cells_near_far_halves"]],
              "rho(d, plane)", [round(x["spearman_d_plane"], 2) for x in b["seeds"]],
              "d near/far", [round(x["mean_d_near_half"] / x["mean_d_far_half"], 2) for x in b["seeds"]])
    print("pooled over geodesics (pairs-weighted):", pooled)
    for t in tasks:
        print("task", t["task"], "route", len(t["route"]) - 1, "cells; rises per seed",
              [len(s["rises"]) for s in t["seeds"]], "min d off goal at step",
              [(s["min_d_at_step"], round(s["min_d_off_goal"], 2)) for s in t["seeds"]])

    fig, axes = plt.subplots(1, 6, figsize=(30, 5))
    near = plane <= np.quantile(plane, 0.2)
    axes[0].scatter(g[~near], d[0][~near], s=1, alpha=0.2, label="other pairs")
    axes[0].scatter(g[near], d[0][near], s=2, alpha=0.5, color="tab:red", label="nearest fifth in the plane")
    axes[0].set(xlabel="maze geodesic (cells)", ylabel="critic d, seed 0", title="d against the geodesic")
    axes[0].legend()
    for t, ax in zip(tasks, axes[1:], strict=True):
        for k, s in enumerate(t["seeds"]):
            ax.plot(s["d_along_route"], label=f"seed {k}")
        ax.set(xlabel="cells along the shortest route", ylabel="critic d(cell, goal)", title=f"task {t['task']}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "wall_leak.png", dpi=80)


if __name__ == "__main__":
    main()
