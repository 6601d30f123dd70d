"""Does a twin MQE critic see a composite task's goal getting closer as its primitives are done?

    python research/twin/distances.py --policy /tmp/w/export/mqe --seeds 5 --out distances.json

For each task and scene seed, the scripted demonstrators solve the task by chaining primitives
(pick-and-place each object onto the plate; open the drawer, then place into it), while the
policy's critic reads its distance d(s_t, g) to the task's goal image at every step. A critic
that stitches has d falling along the whole chain: low rank disagreement with the true remaining
steps (Spearman rho of d against T - t near 1), and d after each primitive below d before it.
A critic that only knows single primitives drops within the last primitive and is flat (or rising)
across the earlier ones. The single pick-and-place task, itself a primitive, is the in-data contrast.

Bad input: one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import tyro

TASKS = ("single_pnp", "double_pnp", "triple_pnp", "quadruple_pnp", "open_drawer_place")


@dataclasses.dataclass(frozen=True)
class DistancesConfig:
    """The MQE critic's distance to a composite goal along a scripted solution of the task."""

    policy: Path  # MQE export or checkpoint directory (as `mqe-serve --policy` takes)
    seeds: int = 5  # scene seeds 0..seeds-1 per task
    tasks: tuple[str, ...] = TASKS  # twin tasks to chain
    out: Path | None = None  # JSON report; None: print the table only


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def trace_task(policy, act, env, task: str, seed: int) -> dict:
    """Solve one scene by chaining the demonstrators; the critic's distance at every step."""
    import jax.numpy as jnp

    from mqe_client.images import preprocess_images
    from robot_client.sim import demos

    image = policy.metadata["image"]

    def fit(images: np.ndarray) -> np.ndarray:
        return preprocess_images(images, image["height"], image["width"], image["resize"])

    env.reset(seed=seed)
    goal = fit(env.goal_image()[None])
    rng = np.random.default_rng(seed)
    frames, boundaries, points = [], [0], []
    for primitive, index, place_xy in demos.solution(env):
        episode = demos.run_primitive(env, primitive, index, rng, place_xy=place_xy)
        frames.append(episode.images[:-1])
        boundaries.append(boundaries[-1] + len(episode.images) - 1)
        points.append(env.score())
    frames.append(env.observation()["image"][None])
    observations = fit(np.concatenate(frames))
    goals = np.repeat(goal, len(observations), axis=0)
    _, distance = act(policy.params, jnp.asarray(observations), jnp.asarray(goals))
    d = np.asarray(distance, dtype=np.float64)
    remaining = len(d) - 1 - np.arange(len(d))
    at_boundaries = d[boundaries]
    return {
        "task": task, "seed": seed, "steps": len(d) - 1, "points": points,
        "spearman_remaining": spearman(d, remaining),
        "distance_at_boundaries": at_boundaries.round(2).tolist(),
        "falls_per_primitive": (np.diff(at_boundaries) < 0).tolist(),
        "distance": d.round(2).tolist(),
    }


def summarize(traces: list[dict]) -> dict[str, dict]:
    out = {}
    for task in dict.fromkeys(t["task"] for t in traces):
        rows = [t for t in traces if t["task"] == task]
        falls = np.array([f for t in rows for f in t["falls_per_primitive"]], dtype=float)
        out[task] = {
            "scenes": len(rows),
            "solved_by_script": sum(t["points"][-1] == len(t["points"]) for t in rows),
            "spearman_remaining_mean": float(np.mean([t["spearman_remaining"] for t in rows])),
            "primitives_with_falling_distance": float(falls.mean()),
            "distance_start_mean": float(np.mean([t["distance_at_boundaries"][0] for t in rows])),
            "distance_end_mean": float(np.mean([t["distance_at_boundaries"][-1] for t in rows])),
        }
    return out


def load_policy_or_none(path: Path):
    """The policy at `path`, or None after one line on stderr saying why it cannot be loaded."""
    from mqe_model.checkpoints import CheckpointError
    from mqe_model.policy import load_policy

    try:
        return load_policy(path)
    except (CheckpointError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return None


def main(cfg: DistancesConfig) -> int:
    unknown = sorted(set(cfg.tasks) - set(TASKS))
    if unknown or cfg.seeds < 1:
        print(f"error: tasks must be among {', '.join(TASKS)} and --seeds >= 1 "
              f"(got tasks {', '.join(unknown) or 'ok'}, seeds {cfg.seeds})", file=sys.stderr)
        return 2
    import jax

    from robot_client.sim import WidowXSimEnv

    policy = load_policy_or_none(cfg.policy)
    if policy is None:
        return 2
    if policy.agent_name != "mqe":
        print(f"error: {cfg.policy} holds a {policy.agent_name} policy; the distance needs an MQE critic",
              file=sys.stderr)
        return 2
    act = jax.jit(policy.act_fn)
    traces = []
    for task in cfg.tasks:
        env = WidowXSimEnv(task=task, seed=0)
        traces += [trace_task(policy, act, env, task, seed) for seed in range(cfg.seeds)]
        env.close()
    summary = summarize(traces)
    print(f"{'task':18} {'scenes':>6} {'solved':>6} {'rho(d, T-t)':>11} {'falls':>6} {'d start':>8} {'d end':>6}")
    for task, s in summary.items():
        print(f"{task:18} {s['scenes']:6d} {s['solved_by_script']:6d} {s['spearman_remaining_mean']:11.2f} "
              f"{s['primitives_with_falling_distance']:6.0%} {s['distance_start_mean']:8.1f} {s['distance_end_mean']:6.1f}")
    if cfg.out:
        cfg.out.write_text(json.dumps({"policy": str(cfg.policy), "summary": summary, "traces": traces}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(DistancesConfig)))
