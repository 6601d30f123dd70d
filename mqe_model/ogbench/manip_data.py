"""Manipulation episodes as OGBench's `generate_manipspace.py` collects them (play and noisy datasets).

The environment runs in `mode='data_collection'` with `terminate_at_goal=False`; an oracle carries
out the current subtask, and when it is done the environment draws a new target (`set_new_target`)
and the matching oracle takes over. Play datasets use plan oracles (a noisy, smoothed keyframe
plan); noisy datasets use closed-loop Markov oracles with per-episode Gaussian action noise and
random actions. Scene episodes where the cube leaves the region the evaluation goals assume are
thrown away and redone.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

PLAN_NOISE = 0.1  # scale of the plan's temporally correlated noise (OGBench play datasets)
PLAN_NOISE_SMOOTHING = 0.5  # smoothing of that noise (OGBench play datasets)
SEGMENT_DT = 0.4  # default seconds per segment between keyframes (the oracles' and OGBench's default)
MAX_SCENE_RETRIES = 100  # redone scene episodes before giving up (a handful is typical)
MARKOV_MIN_NORM = 0.4  # minimum action norm of the Markov oracles (noisy datasets)
MARKOV_MAX_NOISE = 0.1  # noisy datasets: per-episode action noise level xi ~ U(0, 0.1)
# Noise std per action dimension (x, y, z, yaw, gripper) in units of xi (noisy datasets).
MARKOV_NOISE_SCALE = np.array([1.0, 1.0, 1.0, 3.0, 10.0])


def random_action_probability(env_id: str, dataset_type: str) -> float:
    """Probability of a uniformly random action per step: 0 play, 0.2 puzzle-noisy, 0.1 other noisy."""
    if dataset_type == "play":
        return 0.0
    return 0.2 if env_id.startswith("puzzle") else 0.1


def stack_probability(env_id: str, rng: np.random.Generator) -> float:
    """Per-episode probability of stacking the target cube (OGBench's values per cube count)."""
    if env_id.startswith("cube-single"):
        return 0.0
    if env_id.startswith("cube-double"):
        return float(rng.uniform(0.0, 0.25))
    if env_id.startswith("cube-triple"):
        return float(rng.uniform(0.05, 0.35))
    if env_id.startswith("cube-quadruple"):
        return float(rng.uniform(0.1, 0.5))
    return 0.5  # scene (one cube, so unused) and puzzle (ignored by its set_new_target)


def scene_episode_healthy(qpos: np.ndarray) -> bool:
    """Whether the cube stayed visible: not too far right, and not too far left unless in the drawer."""
    cube_xyz = qpos[:, 14:17]
    too_far_right = cube_xyz[:, 1] >= 0.29
    outside_drawer = (cube_xyz[:, 2] < 0.06) | (cube_xyz[:, 2] > 0.08)
    too_far_left = (cube_xyz[:, 1] <= -0.3) & outside_drawer
    return not (too_far_right.any() or too_far_left.any())


def make_oracles(env: Any, env_id: str, dataset_type: str) -> dict[str, Any]:
    """Oracles by task name (`info['privileged/target_task']`): plan oracles for play, Markov for noisy."""
    if dataset_type == "play":
        from ogbench.manipspace.oracles.plan.button_plan import ButtonPlanOracle as Button
        from ogbench.manipspace.oracles.plan.cube_plan import CubePlanOracle as Cube
        from ogbench.manipspace.oracles.plan.drawer_plan import DrawerPlanOracle as Drawer
        from ogbench.manipspace.oracles.plan.window_plan import WindowPlanOracle as Window

        kwargs = {"env": env, "segment_dt": SEGMENT_DT, "noise": PLAN_NOISE, "noise_smoothing": PLAN_NOISE_SMOOTHING}
        scene_cube: dict[str, Any] = {}
    else:
        from ogbench.manipspace.oracles.markov.button_markov import ButtonMarkovOracle as Button
        from ogbench.manipspace.oracles.markov.cube_markov import CubeMarkovOracle as Cube
        from ogbench.manipspace.oracles.markov.drawer_markov import DrawerMarkovOracle as Drawer
        from ogbench.manipspace.oracles.markov.window_markov import WindowMarkovOracle as Window

        kwargs = {"env": env, "min_norm": MARKOV_MIN_NORM}
        scene_cube = {"max_step": 100}  # OGBench gives the scene's cube subtask fewer steps
    if env_id.startswith("cube"):
        return {"cube": Cube(**kwargs)}
    if env_id.startswith("puzzle"):
        # Puzzle has no objects to grasp: OGBench presses its buttons with the gripper closed.
        return {"button": Button(gripper_always_closed=True, **kwargs)}
    return {"cube": Cube(**scene_cube, **kwargs), "button": Button(**kwargs),
            "drawer": Drawer(**kwargs), "window": Window(**kwargs)}


class ManipulationCollector:
    """Collects play episodes in one process; one environment and its oracles, reused."""

    def __init__(self, env_id: str, dataset_type: str, length: int):
        import gymnasium
        import ogbench  # noqa: F401  (registers the environments)

        self.env_id, self.dataset_type = env_id, dataset_type
        self.p_random_action = random_action_probability(env_id, dataset_type)
        self.env = gymnasium.make(env_id, terminate_at_goal=False, mode="data_collection",
                                  max_episode_steps=length, disable_env_checker=True)
        self.oracles = make_oracles(self.env, env_id, dataset_type)
        self.has_buttons = env_id.startswith(("puzzle", "scene"))

    def _attempt(self, seed: int) -> dict[str, np.ndarray]:
        # The oracles draw their keyframe jitter and noise from the global np.random.
        np.random.seed(seed)  # noqa: NPY002
        self.env.action_space.seed(seed)
        rng = np.random.default_rng(seed)
        p_stack = stack_probability(self.env_id, rng)
        xi = rng.uniform(0.0, MARKOV_MAX_NOISE)  # this episode's noise level (noisy datasets only)
        ob, info = self.env.reset(seed=seed)
        oracle = self.oracles[info["privileged/target_task"]]
        oracle.reset(ob, info)
        keys = ("observations", "actions", "terminals", "qpos", "qvel")
        keys += ("button_states",) if self.has_buttons else ()
        episode: dict[str, list] = {k: [] for k in keys}
        done = False
        while not done:
            if self.p_random_action > 0 and rng.uniform() < self.p_random_action:
                action = self.env.action_space.sample()
            else:
                action = np.asarray(oracle.select_action(ob, info))
                if self.dataset_type == "noisy":
                    action = action + rng.normal(0.0, xi * MARKOV_NOISE_SCALE, action.shape)
            action = np.clip(action, -1, 1)
            next_ob, _, terminated, truncated, info = self.env.step(action)
            done = terminated or truncated
            if oracle.done:
                task_ob, task_info = self.env.unwrapped.set_new_target(p_stack=p_stack)
                oracle = self.oracles[task_info["privileged/target_task"]]
                oracle.reset(task_ob, task_info)
            values = [ob, action, done, info["prev_qpos"], info["prev_qvel"]]
            if self.has_buttons:
                values.append(info["prev_button_states"])
            for key, value in zip(keys, values, strict=True):
                episode[key].append(value)
            ob = next_ob
        dtypes = {"terminals": bool, "button_states": np.int64}
        return {k: np.asarray(v, dtype=dtypes.get(k, np.float32)) for k, v in episode.items()}

    def collect(self, seed: int) -> dict[str, Any]:
        """One episode (arrays by key), redone with a derived seed while a scene episode is unhealthy."""
        for retry in range(MAX_SCENE_RETRIES):
            attempt_seed = seed if retry == 0 else int(np.random.SeedSequence([seed, retry]).generate_state(1)[0])
            arrays = self._attempt(attempt_seed)
            if not self.env_id.startswith("scene") or scene_episode_healthy(arrays["qpos"]):
                return {"arrays": arrays, "retries": retry}
        raise RuntimeError(f"{self.env_id}: {MAX_SCENE_RETRIES} scene episodes in a row left the allowed "
                           f"region (seed {seed}); the environment or MuJoCo build behaves unlike OGBench's")
