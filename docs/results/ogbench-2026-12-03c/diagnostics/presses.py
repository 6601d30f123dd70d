"""Does the puzzle-4x4 MQE critic's distance follow the button presses a goal needs? ogbench.md section 30.

    MUJOCO_GL=egl JAX_PLATFORMS=cpu PYTHONPATH=.:/tmp/mj327 python \\
        docs/results/ogbench-2026-12-03c/diagnostics/presses.py RUN DATA.npz OUT.json [--pairs 20000]

RUN: a run directory (or checkpoints root) of an MQE puzzle-4x4-play run, vmapped seeds or one; DATA: an
OGBench-format puzzle-4x4-play file (`mqe-ogbench-data puzzle-4x4-play-v0 --episodes 20 --seed 1`, episodes
the run never trained on). Puzzle-4x4 is "lights out": a press flips its button and the four neighbours,
so the fewest presses that turn one light pattern into another is exact, from a table of all 2^16 press
sets (`mqe_model.toy.lights_out.LightsOut`, the same board the CPU toy trains on); 15 of 16 patterns cannot be reached at all (the toggle map has rank 12). For pairs of
states of one episode (always reachable, offsets uniform in 0..1000 steps) it compares the critic's
d(s, g) in steps (`state_goal_distance`) with the presses and the offset; for pairs across episodes it
splits reachable from unreachable patterns; and for the five evaluation tasks it gives d(start, goal)
against the presses each task needs. Writes OUT.json and prints a summary.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy import stats

SIDE = 4
BUTTONS = SIDE * SIDE
PROPRIO = 19  # joint pos 6, joint vel 6, effector xyz 3, yaw cos/sin 2, gripper opening 1, contact 1
PER_BUTTON = 4  # one-hot state 2, joint position 1, joint velocity 1
BUCKETS = ((0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 7))  # 7 presses reach every reachable pattern


def light_bits(observations: np.ndarray) -> np.ndarray:
    """(N,) the 16 lights of each puzzle-4x4 state observation as one integer (bit i: button i is on)."""
    on = observations[:, PROPRIO + 1 : PROPRIO + PER_BUTTON * BUTTONS : PER_BUTTON] > 0.5
    return (on.astype(np.int64) << np.arange(BUTTONS)).sum(axis=1)


def bucket_means(d: np.ndarray, presses: np.ndarray) -> list[dict]:
    """Mean and count of d per presses bucket."""
    rows = []
    for lo, hi in BUCKETS:
        sel = (presses >= lo) & (presses <= hi)
        rows.append({"presses": f"{lo}" if lo == hi else f"{lo}-{hi}", "n": int(sel.sum()),
                     "mean_d": float(d[sel].mean()) if sel.any() else None})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--pairs", type=int, default=20000)
    parser.add_argument("--episode-length", type=int, default=1001)
    args = parser.parse_args()

    from mqe_model.ogbench.distances import critic_distances, load_run
    from mqe_model.toy.lights_out import LightsOut

    table = LightsOut(SIDE).presses  # tests/mqe_model/test_lights_out.py checks it against the board's algebra

    _, metadata, config, critic = load_run(args.run)
    observations = np.load(args.data)["observations"].astype(np.float32)
    if observations.shape[1] != PROPRIO + PER_BUTTON * BUTTONS:
        raise SystemExit(f"{args.data}: observations of {observations.shape[1]} dims; puzzle-4x4 has 83")
    episodes = len(observations) // args.episode_length
    lights = light_bits(observations)
    rng = np.random.default_rng(0)
    n = args.pairs

    episode = rng.integers(episodes, size=n)
    start = rng.integers(args.episode_length, size=n)
    end = rng.integers(args.episode_length, size=n)
    start, end = np.minimum(start, end), np.maximum(start, end)
    s, g = episode * args.episode_length + start, episode * args.episode_length + end
    within_d = critic_distances(config, critic, observations[s], observations[g])  # (seeds, n)
    within_presses = table[lights[s] ^ lights[g]]
    assert (within_presses >= 0).all(), "a state of one episode cannot reach another: wrong light bits"
    offset = end - start

    a = rng.integers(len(observations), size=n)
    b = rng.integers(len(observations), size=n)
    keep = a // args.episode_length != b // args.episode_length
    a, b = a[keep], b[keep]
    across_d = critic_distances(config, critic, observations[a], observations[b])
    across_presses = table[lights[a] ^ lights[b]]

    report: dict = {"run": str(args.run), "data": str(args.data), "pairs": n, "seeds": []}
    for seed in range(within_d.shape[0]):
        d = within_d[seed]
        reach = across_presses >= 0
        report["seeds"].append({
            "seed": seed,
            "within": {
                "spearman_d_presses": float(stats.spearmanr(d, within_presses)[0]),
                "spearman_d_offset": float(stats.spearmanr(d, offset)[0]),
                "spearman_presses_offset": float(stats.spearmanr(within_presses, offset)[0]),
                "by_presses": bucket_means(d, within_presses),
                "by_offset": [{"offset": f"{lo}-{hi}", "mean_d": float(d[(offset >= lo) & (offset <= hi)].mean())}
                              for lo, hi in ((0, 10), (11, 50), (51, 100), (101, 200), (201, 400), (401, 1000))],
            },
            "across": {
                "reachable_n": int(reach.sum()), "reachable_mean_d": float(across_d[seed][reach].mean()),
                "unreachable_n": int((~reach).sum()), "unreachable_mean_d": float(across_d[seed][~reach].mean()),
                "reachable_by_presses": bucket_means(across_d[seed][reach], across_presses[reach]),
            },
        })
    report["tasks"] = evaluation_tasks(metadata, config, critic, table)
    args.out.write_text(json.dumps(report, indent=1))
    print_summary(report)


def evaluation_tasks(metadata: dict, config, critic, table: np.ndarray) -> list[dict]:
    """d(start, goal) per seed and the presses each of the five evaluation tasks needs."""
    from mqe_model.evaluation import episode_seed, make_env, reset_episode
    from mqe_model.ogbench.distances import critic_distances

    env = make_env("puzzle-4x4-play-v0")
    train_seed = metadata.get("train", {}).get("seed", 0)
    rows = []
    for task in range(1, 6):
        observation, info = reset_episode(env, task, episode_seed(train_seed, task, 0))
        goal = np.asarray(info["goal"], np.float32)[None]
        start = np.asarray(observation, np.float32)[None]
        d = critic_distances(config, critic, start, goal)[:, 0]
        presses = int(table[light_bits(start)[0] ^ light_bits(goal)[0]])
        rows.append({"task": task, "presses": presses, "d_per_seed": [round(float(x), 1) for x in d]})
    return rows


def print_summary(report: dict) -> None:
    for seed in report["seeds"]:
        w, c = seed["within"], seed["across"]
        print(f"seed {seed['seed']}: within one episode, Spearman d~presses {w['spearman_d_presses']:.3f}, "
              f"d~offset {w['spearman_d_offset']:.3f} (presses~offset {w['spearman_presses_offset']:.3f})")
        print("  mean d by presses: " + ", ".join(f"{r['presses']}: {r['mean_d']:.0f} (n {r['n']})"
                                                   for r in w["by_presses"] if r["n"]))
        print("  mean d by offset: " + ", ".join(f"{r['offset']}: {r['mean_d']:.0f}" for r in w["by_offset"]))
        print(f"  across episodes: reachable {c['reachable_mean_d']:.0f} (n {c['reachable_n']}), "
              f"unreachable {c['unreachable_mean_d']:.0f} (n {c['unreachable_n']})")
    for task in report["tasks"]:
        print(f"task {task['task']}: {task['presses']} presses, d(start, goal) per seed {task['d_per_seed']}")


if __name__ == "__main__":
    main()
