"""Which actions MQE's critic prefers on pointmaze-giant-stitch: a one-off diagnostic for ogbench.md section 18.

    JAX_PLATFORMS=cpu python docs/results/ogbench-2026-11-29b/diagnostics/critic_actions.py RUN OUT

Rolls out each seed's deterministic policy (the latest checkpoint of a vmapped run) on the five
evaluation tasks (`--episodes` per task, the evaluation's episode seeds) and, every `--every` steps,
rates the actor's action and `--candidates - 1` perturbations of it (std `--spread`, clipped to
[-1, 1]; the fixed offsets of `mqe-ogbench-eval --critic-candidates`) with the critic's q, the
actor's objective. At each such state it records, for the actor's action, the critic's best and a
random one of the candidates: the action's length (L2 norm, normalized units = the environment's),
and its cosine with the maze's shortest-path direction (from the agent's position towards the centre
of the next cell on a shortest path to the goal cell). With `--same-length` every candidate is first
rescaled to the actor's action's length, so the critic can only choose a direction. Writes
`critic_actions.json` (or `critic_actions-same-length.json`) with the means.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import vmapped_run  # this folder's shared loader (the script's own folder is on sys.path)

from mqe_model.agents import mqe, registry
from mqe_model.evaluation import episode_seed, make_env, reset_episode
from mqe_model.ogbench.distances import geodesic_cells

ENV = "pointmaze-giant-stitch-v0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--candidates", type=int, default=32)
    parser.add_argument("--spread", type=float, default=0.3)
    parser.add_argument("--same-length", action="store_true",
                        help="rescale every candidate to the actor's action's length: direction only")
    args = parser.parse_args()
    run = vmapped_run.load(args.run)
    metadata, encode, policy = run.metadata, run.encode, run.policy
    config = registry.config_from_json("mqe", metadata["config"])
    critic = mqe.Critic(config)
    selection = registry.CriticSelection(args.candidates, args.spread)
    offsets = np.array(selection.spread * jax.random.normal(jax.random.PRNGKey(selection.seed),
                                                              (selection.candidates, 2)))
    offsets[0] = 0.0

    @jax.jit
    def rated(params, observation, code, actions):  # (N,) the critic's distance of each candidate action
        psi_goal = registry.psi_of_codes(code, config)
        features = critic.apply({"params": params["critic"]}, observation, method=mqe.Critic.features)
        phi = critic.apply({"params": params["critic"]}, jnp.repeat(features, len(actions), 0), actions,
                           method=mqe.Critic.phi_of_features)
        return mqe.actor_distance(phi, jnp.repeat(psi_goal, len(actions), 1), config)

    env = make_env(ENV)
    maze = env.unwrapped
    free, geo = geodesic_cells(maze.maze_map)
    index = {tuple(c): k for k, c in enumerate(free.tolist())}
    rng = np.random.default_rng(0)
    rows = {"actor": [], "critic_best": [], "random_candidate": []}
    best_is_actor = []
    for k, params in enumerate(run.seed_params):
        for task in range(1, 6):
            goal = index[tuple(maze.task_infos[task - 1]["goal_ij"])]
            for episode in range(args.episodes):
                observation, info = reset_episode(env, task, episode_seed(metadata.get("train", {}).get("seed", 0), task, episode))
                code = encode(params, np.asarray(info["goal"], np.float32)[None])
                for t in range(1000):
                    obs = np.asarray(observation, np.float32)[None]
                    action = np.asarray(policy(params, obs, code)[0])[0]
                    cell = tuple(maze.xy_to_ij(observation[:2]))
                    if t % args.every == 0 and cell in index and geo[index[cell], goal] > 0:
                        here = index[cell]
                        nxt = min((n for n in np.flatnonzero(geo[here] == 1)), key=lambda n: geo[n, goal])
                        way = np.asarray(maze.ij_to_xy(tuple(free[nxt]))) - observation[:2]
                        way /= np.linalg.norm(way) + 1e-9
                        candidates = np.clip(action[None] + offsets, -1.0, 1.0).astype(np.float32)
                        if args.same_length:
                            lengths = np.linalg.norm(candidates, axis=1, keepdims=True)
                            candidates = np.clip(candidates * np.linalg.norm(action) / np.maximum(lengths, 1e-9),
                                                 -1.0, 1.0).astype(np.float32)
                        d = np.asarray(rated(params, obs, code, candidates))
                        best = int(np.argmin(d))
                        best_is_actor.append(best == 0)
                        for name, a in (("actor", candidates[0]), ("critic_best", candidates[best]),
                                        ("random_candidate", candidates[rng.integers(1, len(candidates))])):
                            norm = float(np.linalg.norm(a))
                            rows[name].append((norm, float(a @ way / (norm + 1e-9))))
                    observation, _, terminated, truncated, info = env.step(action)
                    if terminated or truncated:
                        break
        print(f"seed {k}: {len(best_is_actor)} states so far", flush=True)
    report = {"env": ENV, "step": int(metadata["step"]), "spread": args.spread, "candidates": args.candidates,
              "same_length": args.same_length,
              "states": len(best_is_actor), "critic_keeps_the_actors_action": float(np.mean(best_is_actor))}
    for name, values in rows.items():
        v = np.asarray(values)
        report[name] = {"mean_length": float(v[:, 0].mean()), "mean_cosine_to_shortest_path": float(v[:, 1].mean()),
                        "share_at_least_0.5_cosine": float((v[:, 1] >= 0.5).mean())}
    args.out.mkdir(parents=True, exist_ok=True)
    name = "critic_actions-same-length.json" if args.same_length else "critic_actions.json"
    (args.out / name).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
