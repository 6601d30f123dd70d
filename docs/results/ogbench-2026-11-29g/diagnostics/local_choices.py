"""Where the maze asks for a detour, who takes it: the stitch critic or its actor? For ogbench.md section 19.

    JAX_PLATFORMS=cpu python docs/results/ogbench-2026-11-29g/diagnostics/local_choices.py RUN OUT

For every ordered pair (cell, goal cell) of pointmaze-giant's free cells, at the cell centres, with a
(vmapped) MQE run's latest checkpoint, each seed's:
- critic choice: the neighbouring cell with the least d(neighbour, goal); right when that neighbour
  lies on a shortest route (one cell nearer the goal);
- actor choice: the policy's action at the cell; right when its cosine with the direction to the
  centre of some shortest-route neighbour is at least `--aim` (0.7: within ~45 degrees).
Pairs are split by what the maze asks: "direct" when some shortest-route neighbour lies towards the
goal in the plane (cosine > 0 with the straight line), "detour" when every one lies away from it.
For each evaluation task, also two walks over the cells from its start: one always moving to the
critic's choice, one to the neighbour the actor's action points at most; each reaches the goal or
loops (enters a cell twice): does following either alone solve the task at the level of cells?
Writes `local_choices.json` (rates per split, per geodesic bin and per seed, and per evaluation task
along its shortest route) and `local_choices-taskN-map.txt` (the maze as text for one task's goal:
each cell's geodesic, the critic's choice right or not, the actor's direction), and prints them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ogbench-2026-11-29b" / "diagnostics"))
import vmapped_run  # noqa: E402 - the stitch diagnostics' shared loader

from mqe_model.evaluation import make_env  # noqa: E402
from mqe_model.ogbench.distances import critic_distances, geodesic_cells, load_run  # noqa: E402

ENV = "pointmaze-giant-stitch-v0"
BINS = ((1, 3), (4, 8), (9, 16), (17, 60))  # geodesic cells, inclusive


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--aim", type=float, default=0.7, help="cosine that counts as aiming at a neighbour")
    parser.add_argument("--map-task", type=int, default=5, choices=range(1, 6), help="task whose goal the text map shows")
    args = parser.parse_args()
    run = vmapped_run.load(args.run)
    _, _, config, critic_params = load_run(args.run)
    maze = make_env(ENV).unwrapped
    free, geo = geodesic_cells(maze.maze_map)
    n = len(free)
    centre = np.array([maze.ij_to_xy(tuple(c)) for c in free], np.float32)
    states = np.zeros((n, *run.metadata["observation"]["shape"]), np.float32)
    states[:, :2] = centre
    src, dst = (a.reshape(-1) for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    keep = geo[src, dst] >= 1
    src, dst = src[keep], dst[keep]
    neighbours = [np.flatnonzero(geo[c] == 1) for c in range(n)]

    # Critic: d(every cell, every goal) once per seed, then each pair's best neighbour.
    every_src, every_dst = (a.reshape(-1) for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    d = critic_distances(config, critic_params, states[every_src], states[every_dst]).reshape(-1, n, n)
    critic_right = np.array([[geo[min(neighbours[s], key=lambda m, g=g, k=k: d[k, m, g]), g] == geo[s, g] - 1
                              for s, g in zip(src, dst, strict=True)] for k in range(len(d))])

    # Actor: its action at each pair, against the directions to the shortest-route neighbours.
    straight = unit(centre[dst] - centre[src])
    route_dirs = [unit(centre[[m for m in neighbours[s] if geo[m, g] == geo[s, g] - 1]] - centre[s])
                  for s, g in zip(src, dst, strict=True)]
    detour = np.array([np.max(r @ t) <= 0 for r, t in zip(route_dirs, straight, strict=True)])
    actor_right, actor_straight, aims = [], [], []
    for params in run.seed_params:
        actions = np.asarray(run.policy(params, states[src], run.encode(params, states[dst]))[0])
        aim = unit(actions)
        aims.append(aim)
        actor_right.append([np.max(r @ a) >= args.aim for r, a in zip(route_dirs, aim, strict=True)])
        actor_straight.append(np.sum(aim * straight, axis=1) >= args.aim)
    actor_right, actor_straight = np.array(actor_right), np.array(actor_straight)

    g = geo[src, dst]
    report = {"env": ENV, "step": int(run.metadata["step"]), "pairs": int(len(src)), "aim_cosine": args.aim,
              "splits": []}
    for split, rows in (("direct", ~detour), ("detour", detour)):
        for low, high in ((1, 60), *BINS):
            inside = rows & (g >= low) & (g <= high)
            if not inside.any():
                continue
            entry = {"split": split, "geodesic_cells": [low, high], "pairs": int(inside.sum()),
                     "critic_right": critic_right[:, inside].mean(axis=1).round(3).tolist(),
                     "actor_right": actor_right[:, inside].mean(axis=1).round(3).tolist(),
                     "actor_aims_straight_at_goal": actor_straight[:, inside].mean(axis=1).round(3).tolist()}
            report["splits"].append(entry)
            print(f"{split:6s} {low:2d}-{high:2d} cells ({entry['pairs']:4d} pairs): critic right "
                  f"{critic_right[:, inside].mean():.3f}, actor right {actor_right[:, inside].mean():.3f}, "
                  f"actor aims straight at the goal {actor_straight[:, inside].mean():.3f}")

    pair_index = {(s, t): k for k, (s, t) in enumerate(zip(src.tolist(), dst.tolist(), strict=True))}
    index = {tuple(c): k for k, c in enumerate(free.tolist())}
    def critic_step(cell: int, goal: int, seed: int) -> int:  # the neighbour nearest the goal by d
        near = neighbours[cell]
        return int(near[np.argmin(d[seed, near, goal])])

    def actor_step(cell: int, goal: int, seed: int) -> int:  # the neighbour the action points at most
        near = neighbours[cell]
        return int(near[np.argmax(unit(centre[near] - centre[cell]) @ aims[seed][pair_index[(cell, goal)]])])

    report["tasks"] = []
    for task, info in enumerate(maze.task_infos, start=1):
        start, goal = index[tuple(info["init_ij"])], index[tuple(info["goal_ij"])]
        route, rows = [start], []
        while route[-1] != goal:  # follow one shortest route, recording each cell's pair
            rows.append(pair_index[(route[-1], goal)])
            route.append(int(next(m for m in neighbours[route[-1]] if geo[m, goal] == geo[route[-1], goal] - 1)))
        entry = {"task": task, "route_cells": len(rows), "detour_cells": int(detour[rows].sum()),
                 "critic_right": critic_right[:, rows].mean(axis=1).round(3).tolist(),
                 "actor_right": actor_right[:, rows].mean(axis=1).round(3).tolist(),
                 "actor_wrong_cells": [[free[route[i]].tolist() for i in np.flatnonzero(~actor_right[k, rows])]
                                       for k in range(len(actor_right))],
                 "critic_wrong_cells": [[free[route[i]].tolist() for i in np.flatnonzero(~critic_right[k, rows])]
                                        for k in range(len(critic_right))]}
        for who, step in (("critic", critic_step), ("actor", actor_step)):
            entry[f"{who}_walk"] = [cell_walk(start, goal, k, step, free) for k in range(len(d))]
        report["tasks"].append(entry)
        print(f"task {task}: {entry['route_cells']} cells, {entry['detour_cells']} of them detours; critic right "
              f"{entry['critic_right']}, actor right {entry['actor_right']}; walks reach the goal: critic "
              f"{[w['reached'] for w in entry['critic_walk']]}, actor {[w['reached'] for w in entry['actor_walk']]}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "local_choices.json").write_text(json.dumps(report, indent=1) + "\n")
    info = maze.task_infos[args.map_task - 1]
    grid = task_map(maze, free, geo, d[0], run, index[tuple(info["goal_ij"])])
    (args.out / f"local_choices-task{args.map_task}-map.txt").write_text(grid)
    print(grid)


def cell_walk(start: int, goal: int, seed: int, step, free: np.ndarray) -> dict:
    """Follow `step(cell, goal, seed) -> next cell` from start: whether it reaches the goal, its moves, and
    where it loops (the first cell entered twice) when it does not."""
    walk = [start]
    while walk[-1] != goal:
        walk.append(step(walk[-1], goal, seed))
        if walk[-1] in walk[:-1]:
            return {"reached": False, "moves": len(walk) - 1, "loops_at": free[walk[-1]].tolist()}
    return {"reached": True, "moves": len(walk) - 1, "loops_at": None}


def task_map(maze, free: np.ndarray, geo: np.ndarray, d_seed: np.ndarray, run, goal: int) -> str:
    """The maze as text, for one goal and seed 0: per free cell its geodesic to the goal, '.' or '!' as
    the critic's best neighbour is one cell nearer or not, and the actor's action as an arrow (rows
    are i, top down; columns j; x grows with j and y with i)."""
    index = {tuple(c): k for k, c in enumerate(free.tolist())}
    states = np.zeros((len(free), *run.metadata["observation"]["shape"]), np.float32)
    states[:, :2] = [maze.ij_to_xy(tuple(c)) for c in free]
    params = run.seed_params[0]
    goals = np.repeat(states[goal][None], len(free), 0)
    actions = np.asarray(run.policy(params, states, run.encode(params, goals))[0])
    walls = np.asarray(maze.maze_map)
    lines = [f"goal {free[goal].tolist()}: geodesic in cells, critic's best neighbour nearer (.) or not (!), "
             "actor's action (seed 0)"]
    for i in range(walls.shape[0]):
        row = []
        for j in range(walls.shape[1]):
            k = index.get((i, j))
            if k is None or k == goal:
                row.append("  ## " if k is None else "  GG ")
                continue
            best = min(np.flatnonzero(geo[k] == 1), key=lambda m: d_seed[m, goal])
            x, y = actions[k, :2]
            arrow = (">" if x > 0 else "<") if abs(x) > abs(y) else ("v" if y > 0 else "^")
            row.append(f"{int(geo[k, goal]):3d}{'.' if geo[best, goal] == geo[k, goal] - 1 else '!'}{arrow}")
        lines.append("".join(row))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
