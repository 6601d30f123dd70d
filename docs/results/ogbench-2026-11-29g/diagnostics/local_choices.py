"""One step at a time on pointmaze-giant-stitch: where the critic's state distance, its action distance
and the actor choose the right neighbouring cell. A one-off diagnostic for ogbench.md section 19.

    JAX_PLATFORMS=cpu python docs/results/ogbench-2026-11-29g/diagnostics/local_choices.py RUN OUT

For every ordered pair (cell, goal cell) of the maze's free cells, at cell centres, each seed of a
(vmapped) MQE run's latest checkpoint picks one neighbouring cell by three rules:
- `state`: the neighbour with the least d(neighbour, goal) = MRN(psi(neighbour), psi(goal)), the value
  the critic puts on states (a planner over cells with it needs no actions);
- `action`: the neighbour whose direction, as an action of length `--action-length`, has the least
  d((cell, action), goal) = MRN(phi(cell, action), psi(goal)) (the actor's q, `actor_heads`); one length
  for all four directions, so only the aim is ranked;
- `actor`: the neighbour the policy's action points at most (largest cosine).
A choice is right when the neighbour lies one cell nearer the goal in the maze. Pairs are "direct" when
some such neighbour lies towards the goal in the plane, "detour" when all lie away from it.

Then walks: from each start, move by one rule's choices until the goal or until a cell is entered a
second time (a loop); over all pairs (the share reaching the goal) and from the five evaluation tasks'
starts. Writes `local_choices.json` and `local_choices-taskN-map.txt` (the maze as text for one task's
goal, seed 0: each cell's geodesic, the state rule right or not, the actor's direction), and prints them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ogbench-2026-11-29b" / "diagnostics"))
import vmapped_run  # noqa: E402 - the stitch diagnostics' shared loader

from mqe_model.agents.mqe import Critic, actor_distance  # noqa: E402
from mqe_model.evaluation import make_env  # noqa: E402
from mqe_model.ogbench.distances import critic_distances, geodesic_cells, load_run  # noqa: E402

ENV = "pointmaze-giant-stitch-v0"
BINS = ((1, 3), (4, 8), (9, 16), (17, 60))  # geodesic cells, inclusive
RULES = ("state", "action", "actor")


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-9)


def action_distances(config, critic_params, observations: np.ndarray, actions: np.ndarray,
                     goals: np.ndarray) -> np.ndarray:
    """(seeds, B) d((s, a), g) in environment steps for each seed's critic, the head the actor's q uses."""
    critic = Critic(config)

    def one(params):
        phi = critic.apply({"params": params}, observations, actions, method=Critic.phi)
        psi = critic.apply({"params": params}, goals, method=Critic.psi)
        return actor_distance(phi, psi, config) / config.step_scale

    return np.asarray(jax.jit(jax.vmap(one))(critic_params))


def cell_walk(start: int, goal: int, next_cell) -> dict:
    """Follow `next_cell(cell)` from start: whether it reaches the goal, its moves, the first cell entered
    twice (None when it reaches the goal)."""
    walk = [start]
    while walk[-1] != goal:
        walk.append(int(next_cell(walk[-1])))
        if walk[-1] in walk[:-1]:
            return {"reached": False, "moves": len(walk) - 1, "loops_at": walk[-1]}
    return {"reached": True, "moves": len(walk) - 1, "loops_at": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--action-length", type=float, default=0.7, help="length of the action rule's actions")
    parser.add_argument("--map-task", type=int, default=5, choices=range(1, 6), help="task whose goal the text map shows")
    args = parser.parse_args()
    run = vmapped_run.load(args.run)
    _, _, config, critic_params = load_run(args.run)
    seeds = len(run.seed_params)
    maze = make_env(ENV).unwrapped
    free, geo = geodesic_cells(maze.maze_map)
    n = len(free)
    centre = np.array([maze.ij_to_xy(tuple(c)) for c in free], np.float32)
    states = np.zeros((n, *run.metadata["observation"]["shape"]), np.float32)
    states[:, :2] = centre
    every_src, every_dst = (a.reshape(-1) for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    # The critic's d between every two cells once per seed; the pairs scored are those of distinct cells.
    d = critic_distances(config, critic_params, states[every_src], states[every_dst]).reshape(seeds, n, n)
    keep = geo[every_src, every_dst] >= 1
    src, dst = every_src[keep], every_dst[keep]
    pair_index = {(s, t): k for k, (s, t) in enumerate(zip(src.tolist(), dst.tolist(), strict=True))}
    neighbours = [np.flatnonzero(geo[c] == 1) for c in range(n)]
    # Rows (pair, neighbour): the candidates every rule chooses among.
    cand_pair = np.concatenate([np.full(len(neighbours[s]), k) for k, s in enumerate(src)])
    cand_cell = np.concatenate([neighbours[s] for s in src])
    cand_dir = unit(centre[cand_cell] - centre[src[cand_pair]])

    scores = {"state": -d[:, cand_cell, dst[cand_pair]],
              "action": -action_distances(config, critic_params, states[src[cand_pair]],
                                          (args.action_length * cand_dir).astype(np.float32), states[dst[cand_pair]])}
    aims = []
    for params in run.seed_params:
        aims.append(unit(np.asarray(run.policy(params, states[src], run.encode(params, states[dst]))[0])))
    aims = np.stack(aims)  # (seeds, pairs, 2)
    scores["actor"] = np.einsum("kcx,cx->kc", aims[:, cand_pair], cand_dir)

    # choice[rule][seed, pair]: the neighbour with the best score among the pair's candidates.
    bounds = np.cumsum([0] + [len(neighbours[s]) for s in src])
    choice = {rule: np.array([[cand_cell[bounds[k] + np.argmax(score[seed, bounds[k]:bounds[k + 1]])]
                               for k in range(len(src))] for seed in range(seeds)]) for rule, score in scores.items()}
    right = {rule: geo[c, dst[None]] == geo[src, dst][None] - 1 for rule, c in choice.items()}

    straight = unit(centre[dst] - centre[src])
    towards = np.einsum("cx,cx->c", cand_dir, straight[cand_pair]) > 0
    on_route = geo[cand_cell, dst[cand_pair]] == geo[src[cand_pair], dst[cand_pair]] - 1
    detour = ~np.array([np.any((towards & on_route)[bounds[k]:bounds[k + 1]]) for k in range(len(src))])
    aims_straight = np.einsum("kcx,cx->kc", aims, straight) >= np.cos(np.pi / 4)

    g = geo[src, dst]
    report = {"env": ENV, "step": int(run.metadata["step"]), "pairs": int(len(src)),
              "action_length": args.action_length, "choices": [], "walks_all_pairs": [], "tasks": []}
    # How much each rule's distance moves over a pair's candidates (steps): the neighbouring states'
    # d against the four aims' d at one state.
    spread = {rule: np.array([[np.ptp(scores[rule][seed, bounds[k]:bounds[k + 1]]) for k in range(len(src))]
                              for seed in range(seeds)]) for rule in ("state", "action")}
    report["candidate_spread_steps"] = {rule: {"median": float(np.median(v)), "mean": float(v.mean())}
                                        for rule, v in spread.items()}
    print("spread of d over a pair's candidates, steps (median, mean): " + ", ".join(
        f"{rule} {np.median(v):.1f}, {v.mean():.1f}" for rule, v in spread.items()))
    for split, rows in (("all", np.ones_like(detour)), ("direct", ~detour), ("detour", detour)):
        for low, high in ((1, 60), *BINS):
            inside = rows & (g >= low) & (g <= high)
            if not inside.any():  # no detour is 1-3 cells long
                continue
            entry = {"split": split, "geodesic_cells": [low, high], "pairs": int(inside.sum()),
                     **{f"{rule}_right": right[rule][:, inside].mean(axis=1).round(3).tolist() for rule in RULES},
                     "actor_aims_straight_at_goal": aims_straight[:, inside].mean(axis=1).round(3).tolist()}
            report["choices"].append(entry)
            print(f"{split:6s} {low:2d}-{high:2d} cells ({entry['pairs']:4d} pairs) right: " + ", ".join(
                f"{rule} {right[rule][:, inside].mean():.3f}" for rule in RULES)
                + f"; actor aims straight at the goal {aims_straight[:, inside].mean():.3f}")

    def walk(rule: str, seed: int, start: int, goal: int) -> dict:
        return cell_walk(start, goal, lambda cell: choice[rule][seed, pair_index[(cell, goal)]])

    reached = {rule: np.array([[walk(rule, seed, a, b)["reached"] for a, b in zip(src, dst, strict=True)]
                               for seed in range(seeds)]) for rule in RULES}
    for low, high in ((1, 60), *BINS):
        inside = (g >= low) & (g <= high)
        entry = {"geodesic_cells": [low, high], "pairs": int(inside.sum()),
                 **{f"{rule}_walk_reaches": r[:, inside].mean(axis=1).round(3).tolist() for rule, r in reached.items()}}
        report["walks_all_pairs"].append(entry)
        print(f"walks, {low:2d}-{high:2d} cells ({entry['pairs']:4d} pairs) reach the goal: " + ", ".join(
            f"{rule} {reached[rule][:, inside].mean():.3f}" for rule in RULES))

    index = {tuple(c): k for k, c in enumerate(free.tolist())}
    for task, info in enumerate(maze.task_infos, start=1):
        start, goal = index[tuple(info["init_ij"])], index[tuple(info["goal_ij"])]
        entry = {"task": task, "geodesic_cells": float(geo[start, goal])}
        for rule in RULES:
            walks = [walk(rule, seed, start, goal) for seed in range(seeds)]
            entry[f"{rule}_walks"] = [{**w, "loops_at": None if w["loops_at"] is None else free[w["loops_at"]].tolist()}
                                      for w in walks]
        report["tasks"].append(entry)
        print(f"task {task} walks reach the goal: " + ", ".join(
            f"{rule} {sum(w['reached'] for w in entry[f'{rule}_walks'])}/{seeds} (loops at "
            f"{sorted({tuple(w['loops_at']) for w in entry[f'{rule}_walks'] if w['loops_at']})})" for rule in RULES))

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "local_choices.json").write_text(json.dumps(report, indent=1) + "\n")
    info = maze.task_infos[args.map_task - 1]
    goal = index[tuple(info["goal_ij"])]
    grid = task_map(maze, free, geo, goal, choice, aims, pair_index)
    (args.out / f"local_choices-task{args.map_task}-map.txt").write_text(grid)
    print(grid)


def task_map(maze, free: np.ndarray, geo: np.ndarray, goal: int, choice: dict, aims: np.ndarray,
             pair_index: dict) -> str:
    """The maze as text for one goal, seed 0: per free cell its geodesic to the goal, '.' or '!' as the
    state rule's neighbour is one cell nearer or not, and the actor's action as an arrow (rows are i, top
    down; columns j; x grows with j and y with i)."""
    index = {tuple(c): k for k, c in enumerate(free.tolist())}
    walls = np.asarray(maze.maze_map)
    lines = [f"goal {free[goal].tolist()}: geodesic in cells, the critic's state rule right (.) or not (!), "
             "the actor's action (seed 0)"]
    for i in range(walls.shape[0]):
        row = []
        for j in range(walls.shape[1]):
            cell = index.get((i, j))
            if cell is None or cell == goal:
                row.append("  ## " if cell is None else "  GG ")
                continue
            pair = pair_index[(cell, goal)]
            x, y = aims[0, pair]
            arrow = (">" if x > 0 else "<") if abs(x) > abs(y) else ("v" if y > 0 else "^")
            ok = geo[choice["state"][0, pair], goal] == geo[cell, goal] - 1
            row.append(f"{int(geo[cell, goal]):3d}{'.' if ok else '!'}{arrow}")
        lines.append("".join(row))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
