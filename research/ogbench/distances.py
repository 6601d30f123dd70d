"""Has the MQE critic of a maze run learned long-range distances?

    python research/ogbench/distances.py --workdir runs/ogbench/pointmaze-giant-stitch-v0/mqe/seeds0-3 \\
        --env pointmaze-giant-stitch-v0 --out distances.json

Samples `--pairs` (state, goal) pairs of uniformly random free maze cells, places both at their
cell centres (xy; the rest of the observation, e.g. an ant's joints, is taken from `env.reset`),
and compares the critic's distance d(s, g) with the geodesic cell distance (4-neighbour BFS over
the maze map): Spearman correlation, and the mean d per geodesic bucket, for each seed of the run
and pooled over seeds. A critic that learned only local structure shows a flat mean d beyond a
few cells.

d is the agent's own state-to-goal distance (`mqe.state_goal_distance`, as `mqe.Agent.distance`),
in environment steps. Bad input: one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import tyro

from mqe_model import checkpoints
from mqe_model.checkpoints import CheckpointError
from mqe_model.cli_logging import setup_logging

BUCKETS = ((0, 2), (3, 5), (6, 10), (11, 20), (21, 40), (41, None))  # geodesic cells, inclusive
MAZE_PREFIXES = ("pointmaze-", "antmaze-")  # locomaze environments with a maze_map and xy first


class DistancesError(ValueError):
    """The diagnostic cannot run as asked; the message says why."""


@dataclasses.dataclass(frozen=True)
class DistancesConfig:
    """Compare the MQE critic's distances with maze geodesics on random state pairs."""

    workdir: Path  # run directory (<runs-dir>/<env>/mqe/<run>), its checkpoints root or a step directory
    env: str  # OGBench locomaze environment, e.g. pointmaze-giant-stitch-v0
    pairs: int = 2000  # random (state, goal) pairs of free cells
    seed: int = 0  # seed of the pair sampling
    out: Path | None = None  # JSON report; None: print the table only


def geodesic_cells(maze_map: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(free cells (n, 2) as (i, j), all-pairs shortest path lengths (n, n) in cells, inf if unreachable)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import shortest_path

    free = np.argwhere(np.asarray(maze_map) == 0)
    index = {tuple(c): k for k, c in enumerate(free.tolist())}
    edges = [(k, index[(i + di, j + dj)]) for (i, j), k in index.items()
             for di, dj in ((1, 0), (0, 1)) if (i + di, j + dj) in index]
    rows, cols = (np.array(x, dtype=np.int64) for x in zip(*edges, strict=True)) if edges else ([], [])
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(free), len(free)))
    return free, shortest_path(graph, method="D", directed=False, unweighted=True)


def bucket_table(d: np.ndarray, geo: np.ndarray) -> list[dict[str, Any]]:
    """Mean and std of d per geodesic bucket."""
    table = []
    for lo, hi in BUCKETS:
        mask = (geo >= lo) & (geo <= (np.inf if hi is None else hi))
        n = int(mask.sum())
        table.append({"cells": f"{lo}-{hi}" if hi is not None else f"{lo}+", "n": n,
                      "mean_d": float(d[mask].mean()) if n else None,
                      "std_d": float(d[mask].std()) if n else None})
    return table


def summary(d: np.ndarray, geo: np.ndarray) -> dict[str, Any]:
    """Spearman correlation of d with the geodesic and the bucket table."""
    from scipy.stats import spearmanr

    rho = float(spearmanr(d, geo).statistic)
    return {"spearman": None if math.isnan(rho) else rho, "buckets": bucket_table(d, geo)}


def load_run(workdir: Path) -> tuple[Path, dict[str, Any], Any, Any]:
    """(step dir, metadata, MQE config, params with a leading seed axis) of the run's latest step."""
    import jax

    from mqe_model.agents.configs import config_from_json

    step_dir = checkpoints.resolve_step_dir(workdir)
    metadata = checkpoints.read_metadata(step_dir)
    if metadata["agent"] != "mqe":
        raise DistancesError(f"{step_dir}: agent {metadata['agent']!r}; only MQE runs have a quasimetric critic")
    config = config_from_json("mqe", metadata["config"])
    if config.encoder is not None:
        raise DistancesError(f"{step_dir}: image MQE (encoder {config.encoder!r}); needs a state-based run")
    params = checkpoints.restore_params(step_dir)["critic"]
    if int(metadata.get("num_seeds", 1)) == 1:
        params = jax.tree_util.tree_map(lambda x: x[None], params)
    return step_dir, metadata, config, params


def critic_distances(config: Any, critic_params: Any, observations: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """(seeds, B) `mqe.Agent.distance` of each observation to its goal, for each seed's critic."""
    import jax

    from mqe_model.agents.mqe import state_goal_distance

    one = lambda params: state_goal_distance(params, config, observations, goals)  # noqa: E731
    return np.asarray(jax.jit(jax.vmap(one))(critic_params))


def maze_env(name: str) -> tuple[Any, np.ndarray]:
    """The unwrapped OGBench maze env and an observation from its reset (the template of a state)."""
    if not name.startswith(MAZE_PREFIXES):
        raise DistancesError(f"--env {name}: not a pointmaze/antmaze locomaze environment")
    import ogbench

    try:
        env = ogbench.make_env_and_datasets(name, env_only=True)
    except Exception as e:  # noqa: BLE001 - ogbench/gymnasium raise assorted errors for unknown names
        raise DistancesError(f"--env {name}: OGBench cannot make it ({type(e).__name__}: {e})") from None
    template, _ = env.reset(seed=0)
    maze = env.unwrapped
    if not hasattr(maze, "maze_map"):
        raise DistancesError(f"--env {name}: the environment has no maze_map")
    return maze, np.asarray(template, np.float32)


def diagnose(cfg: DistancesConfig) -> dict[str, Any]:
    """The report: per seed and pooled Spearman correlation and bucket table."""
    if cfg.pairs < 2:  # spearmanr needs two points
        raise DistancesError(f"--pairs {cfg.pairs}: need at least 2")
    step_dir, metadata, config, params = load_run(cfg.workdir)
    maze, template = maze_env(cfg.env)
    if list(template.shape) != list(metadata["observation"]["shape"]):
        raise DistancesError(f"{step_dir}: observations of shape {metadata['observation']['shape']}, but "
                             f"{cfg.env} gives {list(template.shape)}; wrong --env?")
    free, geo_all = geodesic_cells(maze.maze_map)
    rng = np.random.default_rng(cfg.seed)
    a, b = rng.integers(len(free), size=(2, cfg.pairs))
    keep = np.isfinite(geo_all[a, b])
    a, b, geo = a[keep], b[keep], geo_all[a[keep], b[keep]]
    xy = np.array([maze.ij_to_xy(tuple(c)) for c in free], np.float32)
    observations, goals = np.repeat(template[None], len(a), 0), np.repeat(template[None], len(b), 0)
    observations[:, :2], goals[:, :2] = xy[a], xy[b]  # pointmaze: the whole observation is xy
    d = critic_distances(config, params, observations, goals)
    train_seed = int((metadata.get("train") or {}).get("seed", 0))
    per_seed = [{"seed": train_seed + k, **summary(d[k], geo)} for k in range(len(d))]
    return {"env": cfg.env, "step_dir": str(step_dir), "step": int(metadata["step"]), "agent": "mqe",
            "num_seeds": len(d), "pairs": int(len(a)), "free_cells": int(len(free)),
            "max_geodesic": float(geo_all[np.isfinite(geo_all)].max()),
            "distance": "min over heads of MRN(psi(s), psi(g)) / -log(gamma), in steps (mqe.Agent.distance)",
            "per_seed": per_seed, "pooled": summary(d.reshape(-1), np.tile(geo, len(d)))}


def format_table(report: dict[str, Any]) -> str:
    """Mean d per geodesic bucket (rows) for pooled and each seed (columns), then the correlations."""
    fmt = lambda v, spec=".1f": "-" if v is None else format(v, spec)  # noqa: E731
    cols = [("pooled", report["pooled"])] + [(f"seed{s['seed']}", s) for s in report["per_seed"]]
    lines = [f"{report['env']} step {report['step']}: {report['pairs']} pairs, mean d (steps) per geodesic "
             "distance (cells)", f"{'cells':>7} {'n':>6} " + " ".join(f"{n:>9}" for n, _ in cols)]
    for k, row in enumerate(report["pooled"]["buckets"]):
        n = report["per_seed"][0]["buckets"][k]["n"]
        lines.append(f"{row['cells']:>7} {n:>6} " + " ".join(f"{fmt(s['buckets'][k]['mean_d']):>9}" for _, s in cols))
    lines.append(f"{'spearman':>14} " + " ".join(f"{fmt(s['spearman'], '.3f'):>9}" for _, s in cols))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (2 for bad input)."""
    setup_logging(timestamps=False, absl_level=logging.ERROR)
    cfg = tyro.cli(DistancesConfig, args=argv)
    try:
        report = diagnose(cfg)
    except (DistancesError, CheckpointError) as e:
        print(f"distances: error: {e}", file=sys.stderr)
        return 2
    print(format_table(report))
    if cfg.out is not None:
        cfg.out.parent.mkdir(parents=True, exist_ok=True)
        cfg.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
