"""Does the goal image's convention make a twin policy hover in closed loop?

    python research/twin/closed_loop.py --policy /tmp/w/export/mqe --seeds 15 --out closed_loop.json

Each scene seed is run in closed loop twice, with two goal images of the same goal layout:
'twin', the twin's goal image (objects at their goal places, the arm at its reset pose), and
'data', the last frame of the scripted solution in that scene (noise-free demonstrators: the arm
12 cm above its last release, as every primitive episode in the data ends). Observations are
rendered and resized as the training data are (`render_observation`, then the policy's own
preprocessing), and the twin steps each action as the data generator does, so that the two goal
conventions are the only difference. A trial succeeds if the scene scores full points at the end.

Teacher-forced along each scripted Single PnP solution, the actor's actions for both goals are
compared with the demonstrator's: tip step error (mm) and gripper command agreement.

Bad input: one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import tyro

TASKS = ("single_pnp", "double_pnp", "triple_pnp", "quadruple_pnp", "open_drawer", "open_drawer_place")
GOALS = ("twin", "data")


@dataclasses.dataclass(frozen=True)
class ClosedLoopConfig:
    """Closed-loop success of a twin policy under the two goal conventions."""

    policy: Path  # export or checkpoint directory (as `mqe-serve --policy` takes)
    seeds: int = 15  # scene seeds 0..seeds-1 per task
    tasks: tuple[str, ...] = ("single_pnp", "double_pnp")  # twin tasks to run
    max_steps: int = 200  # steps per trial (at 5 Hz, 40 s of simulated time)
    out: Path | None = None  # JSON report; None: print the table only


class Actor:
    """The policy's mean action (robot units) and distance for observations rendered by the twin."""

    def __init__(self, policy) -> None:
        import jax

        from mqe_client.images import preprocess_images

        image = policy.metadata["image"]
        self._fit = lambda x: preprocess_images(x, image["height"], image["width"], image["resize"])
        self._act = jax.jit(policy.act_fn)
        self._params = policy.params

    def __call__(self, observations: np.ndarray, goal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        obs = self._fit(observations)
        goals = np.repeat(self._fit(goal[None]), len(obs), axis=0)
        actions, distance = self._act(self._params, obs, goals)
        return np.asarray(actions, np.float64), np.asarray(distance, np.float64)


def scripted(env, seed: int):
    """Reset to scene `seed` and solve it with the noise-free demonstrators: the episodes."""
    from robot_client.sim import demos

    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    return [demos.run_primitive(env, p, i, rng, place_xy=xy) for p, i, xy in demos.solution(env)]


def goal_images(env, seed: int) -> dict[str, np.ndarray]:
    env.reset(seed=seed)
    twin = env.goal_image()
    episodes = scripted(env, seed)
    return {"twin": twin, "data": episodes[-1].images[-1]}


def run_trial(env, actor: Actor, seed: int, goal: np.ndarray, max_steps: int) -> dict:
    env.reset(seed=seed)
    distances, tip = [], []
    for _ in range(max_steps):
        action, distance = actor(env.observation()["image"][None], goal)
        distances.append(float(distance[0]))
        tip.append(env.ee_pose()[:3, 3].copy())
        env.step(action[0])
    points = env.score()
    steps = np.linalg.norm(np.diff(np.array(tip), axis=0), axis=1)
    return {
        "seed": seed, "points": points, "success": points == env.max_points,
        "distance_first_last": [round(distances[0], 2), round(distances[-1], 2)],
        "tip_step_mm_last_half": float(steps[len(steps) // 2:].mean() * 1000),
    }


def teacher_forced(env, actor: Actor, seed: int, goals: dict[str, np.ndarray]) -> dict:
    """The actor's actions on the demonstrator's own frames of a Single PnP solution."""
    episode = scripted(env, seed)[0]
    frames, demo = episode.images[:-1], episode.actions[:-1].astype(np.float64)
    out = {}
    for name, goal in goals.items():
        actions, _ = actor(frames, goal)
        out[name] = {
            "tip_error_mm": float(np.linalg.norm(actions[:, :3] - demo[:, :3], axis=1).mean() * 1000),
            "gripper_agreement": float(np.mean((actions[:, 6] > 0.5) == (demo[:, 6] > 0.5))),
        }
    out["demo_tip_step_mm"] = float(np.linalg.norm(demo[:, :3], axis=1).mean() * 1000)
    return out


def main(cfg: ClosedLoopConfig) -> int:
    unknown = sorted(set(cfg.tasks) - set(TASKS))
    if unknown or cfg.seeds < 1 or cfg.max_steps < 1:
        print(f"error: tasks must be among {', '.join(TASKS)}, --seeds and --max-steps >= 1 "
              f"(got tasks {', '.join(unknown) or 'ok'}, seeds {cfg.seeds}, max steps {cfg.max_steps})",
              file=sys.stderr)
        return 2
    from distances import load_policy_or_none  # research/twin/, beside this script

    from robot_client.sim import WidowXSimEnv

    policy = load_policy_or_none(cfg.policy)
    if policy is None:
        return 2
    actor = Actor(policy)
    trials, forced = [], []
    for task in cfg.tasks:
        env = WidowXSimEnv(task=task, seed=0)
        for seed in range(cfg.seeds):
            goals = goal_images(env, seed)
            for name in GOALS:
                trials.append({"task": task, "goal": name, **run_trial(env, actor, seed, goals[name], cfg.max_steps)})
            if task == "single_pnp":
                forced.append(teacher_forced(env, actor, seed, goals))
            print(f"{task} seed {seed}: " + ", ".join(
                f"{t['goal']} {t['points']}" for t in trials[-len(GOALS):]), flush=True)
        env.close()

    print(f"\n{'task':18} {'goal':5} {'success':>8} {'points':>7} {'d first->last':>14} {'tip mm/step':>11}")
    summary = {}
    for task in cfg.tasks:
        for name in GOALS:
            rows = [t for t in trials if t["task"] == task and t["goal"] == name]
            s = {
                "successes": sum(t["success"] for t in rows), "trials": len(rows),
                "points_mean": float(np.mean([t["points"] for t in rows])),
                "distance_first_mean": float(np.mean([t["distance_first_last"][0] for t in rows])),
                "distance_last_mean": float(np.mean([t["distance_first_last"][1] for t in rows])),
                "tip_step_mm_last_half": float(np.mean([t["tip_step_mm_last_half"] for t in rows])),
            }
            summary[f"{task}/{name}"] = s
            print(f"{task:18} {name:5} {s['successes']:>4}/{s['trials']:<3} {s['points_mean']:7.2f} "
                  f"{s['distance_first_mean']:6.1f} -> {s['distance_last_mean']:5.1f} {s['tip_step_mm_last_half']:11.1f}")
    if forced:
        print(f"\nteacher-forced on scripted Single PnP (demonstrator's mean tip step "
              f"{np.mean([f['demo_tip_step_mm'] for f in forced]):.1f} mm):")
        for name in GOALS:
            err = np.mean([f[name]["tip_error_mm"] for f in forced])
            agree = np.mean([f[name]["gripper_agreement"] for f in forced])
            summary[f"teacher_forced/{name}"] = {"tip_error_mm": float(err), "gripper_agreement": float(agree)}
            print(f"  goal {name:5}: tip error {err:5.1f} mm, gripper agreement {agree:.0%}")
    if cfg.out:
        cfg.out.write_text(json.dumps({"policy": str(cfg.policy), "summary": summary, "trials": trials,
                                       "teacher_forced": forced}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(ClosedLoopConfig)))
