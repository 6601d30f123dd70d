"""OGBench evaluation during training, in worker processes so the accelerator never waits.

OGBench's protocol: the 5 evaluation tasks of the environment, N episodes each, deterministic
actions (the clipped policy mean, un-normalized with the checkpoint's statistics); success is
`info["success"]` at the end of the episode. Workers run JAX on the CPU, one task per job.
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

NUM_TASKS = 5


class EvaluationUnavailable(RuntimeError):
    """OGBench or the requested environment cannot be used here; the message says what to install."""


def _init_worker() -> None:
    # Evaluation must not take the training GPU: pin this process's JAX to the CPU before first use.
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.config.update("jax_platforms", "cpu")


def make_env(env_name: str) -> Any:
    """An OGBench environment by name (needs the `ogbench` package)."""
    try:
        import ogbench
    except ImportError:
        raise EvaluationUnavailable("--eval-env needs OGBench: pip install ogbench") from None
    try:
        return ogbench.make_env_and_datasets(env_name, env_only=True)
    except Exception as e:  # gymnasium raises several types for an unknown id
        raise EvaluationUnavailable(f"--eval-env {env_name}: cannot create it ({e})") from None


def evaluate_task(env_name: str, task_id: int, episodes: int, agent: str, metadata: dict[str, Any],
                  params: Any, seed: int) -> dict[str, float]:
    """Success rate and mean episode length of the policy on one task (runs in a worker)."""
    import jax
    import jax.numpy as jnp

    from mqe_model.agents import registry
    from mqe_model.data.images import preprocess_image
    from mqe_model.data.normalization import ActionStats

    config = registry.config_from_json(agent, metadata["config"])
    stats = ActionStats.from_json(metadata["action_stats"])
    act = registry.make_act_fn(agent, config, stats.dim)
    center, half = (jnp.asarray(x) for x in stats.center_and_half_range())
    policy = jax.jit(lambda p, o, g: center + half * act(p, o[None], g[None])[0][0])
    image = metadata.get("image")
    prepare = (lambda x: np.asarray(x, np.float32)) if image is None else (  # noqa: E731
        lambda x: preprocess_image(np.asarray(x), image["height"], image["width"], image["resize"]))
    env = make_env(env_name)
    successes, lengths = [], []
    for episode in range(episodes):
        observation, info = env.reset(seed=seed + 1000 * task_id + episode,
                                      options={"task_id": task_id, "render_goal": False})
        goal = prepare(info["goal"])
        done, steps = False, 0
        while not done:
            action = np.asarray(policy(params, prepare(observation), goal))
            observation, _, terminated, truncated, info = env.step(action)
            done, steps = terminated or truncated, steps + 1
        successes.append(float(info["success"]))
        lengths.append(steps)
    return {"success": float(np.mean(successes)), "length": float(np.mean(lengths))}


class OGBenchEvaluator:
    """Submits evaluations of parameter snapshots to a process pool; results are collected later."""

    def __init__(self, env_name: str, episodes: int, workers: int, seed: int = 0):
        make_env(env_name)  # fail now, with one line, if OGBench or the environment is missing
        self.env_name, self.episodes, self.seed = env_name, episodes, seed
        self._pool = concurrent.futures.ProcessPoolExecutor(
            max(1, workers), mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker)
        self._pending: list[tuple[int, list[concurrent.futures.Future]]] = []

    def submit(self, step: int, agent: str, metadata: dict[str, Any], params: Any) -> None:
        """Evaluate `params` (copied to the host now) on the 5 tasks in the background."""
        import jax

        host_params = jax.device_get(params)
        if metadata.get("num_seeds", 1) > 1:
            host_params = jax.tree_util.tree_map(lambda x: x[0], host_params)  # seed 0
        jobs = [self._pool.submit(evaluate_task, self.env_name, task, self.episodes, agent, metadata,
                                  host_params, self.seed) for task in range(1, NUM_TASKS + 1)]
        self._pending.append((step, jobs))

    def _collect(self, step: int, jobs: list[concurrent.futures.Future]) -> dict[str, float]:
        results = [job.result() for job in jobs]
        out = {f"eval/task{i}_success": r["success"] for i, r in enumerate(results, start=1)}
        out["eval/success"] = float(np.mean([r["success"] for r in results]))
        out["eval/length"] = float(np.mean([r["length"] for r in results]))
        logger.info("evaluation at step %d on %s: success %.3f", step, self.env_name, out["eval/success"])
        return out

    def poll(self) -> list[tuple[int, dict[str, float]]]:
        """Results of the evaluations that have finished, oldest first."""
        done = []
        while self._pending and all(job.done() for job in self._pending[0][1]):
            step, jobs = self._pending.pop(0)
            done.append((step, self._collect(step, jobs)))
        return done

    def finish(self) -> list[tuple[int, dict[str, float]]]:
        """Wait for every submitted evaluation, then shut the workers down."""
        done = [(step, self._collect(step, jobs)) for step, jobs in self._pending]
        self._pending.clear()
        self._pool.shutdown()
        return done
