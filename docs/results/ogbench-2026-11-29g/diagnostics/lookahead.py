"""How far the stitch critic's state distance alone gets, acting through the true simulator: ogbench.md section 19.

    JAX_PLATFORMS=cpu python docs/results/ogbench-2026-11-29g/diagnostics/lookahead.py RUN OUT --episodes 5

Not a policy MQE learns; a bound on what its critic's psi knows. At every step of an evaluation episode
of pointmaze-giant-stitch, each candidate action (the actor's own and `--directions` full-length ones
around the circle) is held for `--horizon` steps in a private copy of the simulator (pointmaze's
dynamics: position += 0.2 x action, then MuJoCo resolves the walls), and the episode takes one step of
the candidate whose end state has the least d(end, goal) = MRN(psi(end), psi(goal)). Same episodes and
seeds as the evaluation (`episode_seed`), each seed of a (vmapped) run's latest checkpoint. Writes
`lookahead.json`: success per task and seed, the same with the actor alone for comparison, and for each
lookahead episode where it ended and the critic's d there against d at the start.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ogbench-2026-11-29b" / "diagnostics"))

ENV = "pointmaze-giant-stitch-v0"


def candidate_ends(model, data, position: np.ndarray, actions: np.ndarray, horizon: int) -> np.ndarray:
    """Positions after holding each action for `horizon` steps from `position` (pointmaze's step)."""
    ends = np.empty_like(actions)
    for k, action in enumerate(actions):
        data.qpos[:] = position
        for _ in range(horizon):
            data.qpos[:] = data.qpos + 0.2 * action
            data.qvel[:] = 0.0
            mujoco.mj_step(model, data, nstep=5)
        ends[k] = data.qpos
    return ends


def run_seed(job: tuple[str, int, int, int, int]) -> dict:
    """Success per task of seed `seed`'s lookahead and actor-only episodes."""
    run_dir, seed, episodes, directions, horizon = job
    import jax
    import vmapped_run

    from mqe_model.agents.mqe import state_goal_distance
    from mqe_model.evaluation import episode_seed, make_env, reset_episode
    from mqe_model.ogbench.distances import load_run

    run = vmapped_run.load(Path(run_dir))
    _, _, config, critic_params = load_run(Path(run_dir))
    critic = jax.tree_util.tree_map(lambda x: x[seed], critic_params)
    params = run.seed_params[seed]
    distance = jax.jit(lambda obs, goal: state_goal_distance(critic, config, obs, goal))
    angles = 2 * np.pi * np.arange(directions) / directions
    circle = np.clip(np.stack([np.cos(angles), np.sin(angles)], axis=1) * np.sqrt(2), -1, 1)
    env = make_env(ENV)
    model = env.unwrapped.model
    data = mujoco.MjData(model)
    train_seed = run.metadata.get("train", {}).get("seed", 0)
    result = {"seed": seed, "lookahead": {}, "actor": {}, "lookahead_episodes": []}
    for task in range(1, 6):
        for mode in ("lookahead", "actor"):
            successes = 0
            for episode in range(episodes):
                observation, info = reset_episode(env, task, episode_seed(train_seed, task, episode))
                goal = np.asarray(info["goal"], np.float32)[None]
                code = run.encode(params, goal)
                start_d = float(distance(np.asarray(observation, np.float32)[None], goal)[0])
                done = False
                while not done:
                    action = np.asarray(run.policy(params, np.asarray(observation, np.float32)[None], code)[0])[0]
                    if mode == "lookahead":
                        candidates = np.concatenate([action[None], circle]).astype(np.float32)
                        ends = candidate_ends(model, data, np.asarray(observation, np.float64), candidates, horizon)
                        d = np.asarray(distance(ends.astype(np.float32), np.repeat(goal, len(ends), 0)))
                        action = candidates[int(np.argmin(d))]
                    observation, _, terminated, truncated, info = env.step(action)
                    done = terminated or truncated
                successes += bool(info["success"])
                if mode == "lookahead":  # where it ended, and the critic's d there against the start's
                    result["lookahead_episodes"].append({
                        "task": task, "episode": episode, "success": bool(info["success"]), "start_d": start_d,
                        "end_xy": np.asarray(observation).tolist(),
                        "end_d": float(distance(np.asarray(observation, np.float32)[None], goal)[0])})
            result[mode][task] = successes / episodes
        print(f"seed {seed} task {task}: lookahead {result['lookahead'][task]:.2f}, actor {result['actor'][task]:.2f}",
              flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--episodes", type=int, default=5, help="episodes per task and seed")
    parser.add_argument("--directions", type=int, default=16, help="full-length candidate actions around the circle")
    parser.add_argument("--horizon", type=int, default=8, help="steps each candidate is held in the lookahead")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    from mqe_model import checkpoints

    seeds = int(checkpoints.read_metadata(checkpoints.resolve_step_dir(args.run)).get("num_seeds", 1))
    jobs = [(str(args.run), seed, args.episodes, args.directions, args.horizon) for seed in range(seeds)]
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(run_seed, jobs))
    report = {"env": ENV, "episodes_per_task": args.episodes, "directions": args.directions, "horizon": args.horizon,
              "seeds": results,
              **{f"{mode}_success": float(np.mean([np.mean(list(r[mode].values())) for r in results]))
                 for mode in ("lookahead", "actor")}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "lookahead.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"success: lookahead {report['lookahead_success']:.3f}, actor {report['actor_success']:.3f}")


if __name__ == "__main__":
    main()
