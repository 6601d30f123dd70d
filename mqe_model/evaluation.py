"""OGBench evaluation during training, in worker processes so the accelerator never waits.

OGBench's protocol: the 5 evaluation tasks of the environment, N episodes each, deterministic
actions (the clipped policy mean, un-normalized with the checkpoint's statistics); success is
`info["success"]` at the end of the episode. Workers run JAX on the CPU, one task per job.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import json
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from mqe_model.cli_logging import quiet_simulator_warnings
from mqe_model.worker_processes import exit_with_parent

logger = logging.getLogger(__name__)

NUM_TASKS = 5
CHEAP_ENV_S = 0.1  # environments made faster than this run a task's episodes side by side


class EvaluationUnavailable(RuntimeError):
    """OGBench or the requested environment cannot be used here; the message says what to install."""


# Below the training process in the scheduler: when more workers than cores evaluate (several runs
# on one machine), the training loops keep the cores their batches and dispatches need.
WORKER_NICENESS = 10
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def init_worker(single_thread: bool = True, parent_pid: int | None = None) -> None:
    """Set up an evaluation process: JAX on the CPU (the training GPU stays free), one thread, niced
    below the training; with `parent_pid`, the process dies with its parent
    (`worker_processes.exit_with_parent`).

    A worker's policy is a small network on a few observations; XLA's default thread pool (one thread
    per core) gains nothing there, and with dozens of workers beside the training processes the pools'
    threads fight over the cores (`benchmarks/ogbench_eval.py --workers N` measures both).
    """
    if parent_pid is not None:
        exit_with_parent(parent_pid)
    quiet_simulator_warnings()
    os.nice(WORKER_NICENESS)
    os.environ["JAX_PLATFORMS"] = "cpu"
    if single_thread:
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {SINGLE_THREAD_XLA}".strip()
    import jax

    jax.config.update("jax_platforms", "cpu")
    if single_thread:
        start_backend_on_one_core()


def start_backend_on_one_core() -> None:
    """Create JAX's CPU backend while this process may run on one core only, then give it back
    every core it had. XLA sizes the CPU client's thread pools by the cores a process may use, and
    `SINGLE_THREAD_XLA` does not shrink them all: on a 64-core machine each worker held ~130 threads, and
    seven runs evaluating at once (399 workers) hit the thread limit (`pthread_create` failed in
    `PjRtCpuClient`, and every run's pool broke). Sized on one core, a worker holds a few threads.

    Every thread gets the cores back, not only this one: a thread started while the process was
    narrowed keeps that one core, and XLA runs its computations on such threads. With only the main
    thread restored, all the workers of a machine computed their policies on its first core (scene-play
    evaluations on a 64-CPU machine ran ~10x slower than planned)."""
    import jax

    def first_run() -> None:  # a first compilation and run: the compiler's and the runtime's pools start lazily
        jax.jit(lambda x: x + 1)(jax.numpy.zeros(())).block_until_ready()

    if not hasattr(os, "sched_getaffinity"):  # not Linux: no affinity to narrow
        first_run()
        return
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        first_run()
    finally:
        restore_affinity(allowed)


def restore_affinity(cores: set[int]) -> None:
    """Let every thread of this process run on `cores` (sched_setaffinity with pid 0 sets the calling
    thread's alone; each thread's id is listed under /proc/self/task, this one's too)."""
    for thread_id in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(thread_id), cores)
        except ProcessLookupError:  # the thread has ended since the listing
            pass


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


@functools.lru_cache(maxsize=4)
def compiled_policy(agent: str, spec: str, sampling: Any = None) -> tuple[Callable, Callable]:
    """The jitted (goal encoder, deterministic act) of an agent with this JSON config and action
    statistics (with a `policy.ActionSampling`, the act samples and takes a noise argument). Cached: a worker
    runs many jobs of one run, and the compilations would otherwise be repeated for each."""
    import jax

    from mqe_model.agents.configs import config_from_json
    from mqe_model.data.normalization import ActionStats
    from mqe_model.policy import inference_fns

    fields = json.loads(spec)
    config = config_from_json(agent, fields["config"])
    encode_goals, act = inference_fns(agent, config, ActionStats.from_json(fields["action_stats"]), sampling)
    return jax.jit(encode_goals), jax.jit(act)


def evaluate_task(env_name: str, task_id: int, episodes: int, agent: str, metadata: dict[str, Any],
                  params: Any, seed: int, first_episode: int = 0, sampling: Any = None) -> dict[str, float]:
    """Success rate and mean episode length of the policy on one task (runs in a worker), over
    episodes `first_episode` .. `first_episode + episodes - 1`: a task's episodes can be split into
    several jobs, each episode seeded by its index (`reset_episode` says how far that fixes it).

    Where environments are cheap to make (pointmaze: 10 ms), the task's episodes run side by side,
    one environment each, so each step is one batched policy call; where they are not (the
    manipulation scenes take ~0.8 s each, and their physics step costs ten times the policy), one
    environment runs them in turn. Either way episode `i` is seeded alike, so the results agree.
    """
    from mqe_client.images import preprocess_image

    encode, policy = compiled_policy(agent, json.dumps({key: metadata[key] for key in ("config", "action_stats")},
                                                       sort_keys=True), sampling)
    image = metadata.get("image")
    prepare = (lambda x: np.asarray(x, np.float32)) if image is None else (  # noqa: E731
        lambda x: preprocess_image(np.asarray(x), image["height"], image["width"], image["resize"]))
    start = time.perf_counter()
    envs = [make_env(env_name)]
    width = episodes if time.perf_counter() - start < CHEAP_ENV_S else 1
    envs += [make_env(env_name) for _ in range(width - 1)]
    successes, lengths = np.zeros(episodes), np.zeros(episodes)
    end_distances = np.full(episodes, np.nan)  # the critic's distance to the goal at the last step (MQE)
    noise = np.zeros((width, len(metadata["action_stats"]["low"])), np.float32)
    for first in range(0, episodes, width):
        wave = list(range(first, min(first + width, episodes)))
        observations, goals, noise_streams = [], [], []
        for env, episode in zip(envs, wave, strict=False):
            seed_of_episode = episode_seed(seed, task_id, first_episode + episode)
            observation, info = reset_episode(env, task_id, seed_of_episode)
            observations.append(prepare(observation))
            goals.append(prepare(info["goal"]))
            noise_streams.append(np.random.default_rng(seed_of_episode))  # an episode's draws, however batched
        # A short last wave is padded with copies: one batch shape, one compilation.
        observations = np.stack(observations + observations[-1:] * (width - len(wave)))
        codes = encode(params, np.stack(goals + goals[-1:] * (width - len(wave))))
        running = np.arange(width) < len(wave)
        while running.any():
            for slot in np.flatnonzero(running) if sampling else ():
                noise[slot] = noise_streams[slot].standard_normal(noise.shape[1])
            actions, distances = (np.asarray(x) for x in policy(params, observations, codes,
                                                                 *((noise,) if sampling else ())))
            for slot in np.flatnonzero(running):
                end_distances[wave[slot]] = distances[slot]
                observation, _, terminated, truncated, info = envs[slot].step(actions[slot])
                observations[slot] = prepare(observation)
                lengths[wave[slot]] += 1
                if terminated or truncated:
                    running[slot] = False
                    successes[wave[slot]] = float(info["success"])
    for env in envs:
        env.close()
    return {"success": float(np.mean(successes)), "length": float(np.mean(lengths)), "episodes": episodes,
            "episode_success": successes.tolist(), "episode_end_distance": end_distances.tolist()}


def episode_seed(seed: int, task_id: int, episode: int) -> int:
    """The seed of evaluation episode `episode` (0-based) of task `task_id` in an evaluation seeded
    `seed` (the trainer's --seed): one formula for every job, and for scripts that replay episodes."""
    return seed + 1000 * task_id + episode


def reset_episode(env: Any, task_id: int, seed: int) -> tuple[Any, dict[str, Any]]:
    """`env.reset` for one evaluation episode, seeded by `seed` (its `episode_seed`). Beside the seed that `reset`
    takes, OGBench's mazes draw the noise of the start and goal positions from numpy's global state,
    which is seeded here too (and restored afterwards), so a maze episode is the same on every call.
    A manipulation episode starts the same, but its goal observation is not: OGBench settles the goal
    scene with two steps of `action_space.sample()`, and that property makes a new, unseeded space
    (OS entropy) on every call, so the goal's arm pose varies. Manipulation evaluations therefore
    reproduce their distribution, not their samples."""
    state = np.random.get_state()  # noqa: NPY002 - the global state OGBench draws from
    np.random.seed(seed)  # noqa: NPY002
    try:
        return env.reset(seed=seed, options={"task_id": task_id, "render_goal": False})
    finally:
        np.random.set_state(state)  # noqa: NPY002


def episode_chunks(episodes: int, jobs_per_evaluation: int, workers: int) -> list[tuple[int, int]]:
    """(first episode, count) of each job of one task: enough jobs per evaluation to occupy every
    worker, as even as possible. One job per task left most of a many-core machine idle at a run's
    final evaluation (20 jobs for 4 seeds x 5 tasks on 30-60 workers)."""
    parts = min(episodes, max(1, -(-workers // jobs_per_evaluation)))
    bounds = np.linspace(0, episodes, parts + 1).round().astype(int)
    return [(int(a), int(b - a)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


EPISODE_LISTS = ("episode_success", "episode_end_distance")  # per-episode results of evaluate_task


def combine(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One task's success rate and mean length from its jobs' results, weighted by their episodes,
    and their per-episode lists joined in episode order."""
    episodes = sum(r["episodes"] for r in results)
    out = {key: sum(r[key] * r["episodes"] for r in results) / episodes for key in ("success", "length")}
    for key in EPISODE_LISTS:
        if all(key in r for r in results):
            out[key] = [v for r in results for v in r[key]]
    return out


def end_distance_metrics(results: list[dict[str, Any]]) -> dict[str, float]:
    """The critic's mean distance to the goal (steps) at the last step of the successful and of the
    failed episodes: whether a failure is a policy that stops short of a goal the critic sees as far,
    or a critic that sees the goal reached where it is not. Empty for agents without a distance."""
    if not all(key in r for r in results for key in EPISODE_LISTS):
        return {}
    success = np.concatenate([r["episode_success"] for r in results]).astype(bool)
    distance = np.concatenate([r["episode_end_distance"] for r in results])
    out = {}
    for name, mask in (("success", success), ("failure", ~success)):
        if mask.any() and np.isfinite(distance[mask]).all():
            out[f"eval/end_distance_{name}"] = float(distance[mask].mean())
    return out


# The numerical libraries' thread pools in the workers: one thread. A spawned worker imports numpy
# (OpenBLAS, a thread per core) before its initializer runs, so this goes through the environment the
# worker starts with. It is set only while a worker is started: a lasting change would reach every
# later child of the training process (GNU nproc, for one, reads OMP_NUM_THREADS).
WORKER_THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@contextlib.contextmanager
def worker_environment() -> Iterator[None]:
    """`WORKER_THREAD_ENV` in os.environ for the duration, then the previous values back."""
    saved = {key: os.environ.get(key) for key in WORKER_THREAD_ENV}
    os.environ.update(WORKER_THREAD_ENV)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class EvaluationPool(concurrent.futures.ProcessPoolExecutor):
    """A process pool whose workers start with `WORKER_THREAD_ENV` (they are started by `submit`)."""

    def submit(self, fn, /, *args, **kwargs):
        with worker_environment():
            return super().submit(fn, *args, **kwargs)


def evaluation_pool(workers: int) -> EvaluationPool:
    """`workers` fresh (spawned) evaluation processes that die with this one. The executor starts
    them as jobs are submitted, from the submitting thread: submit from the training loop's."""
    return EvaluationPool(max(1, workers), mp_context=multiprocessing.get_context("spawn"),
                          initializer=init_worker, initargs=(True, os.getpid()))


Jobs = list[list[list[concurrent.futures.Future]]]  # one evaluation's jobs, [seed][task][chunk]


class OGBenchEvaluator:
    """Submits evaluations of parameter snapshots to a process pool; results are collected later.

    A worker that dies (killed, out of memory or threads) breaks the whole pool: the evaluations in
    it are logged as failed and listed in `failed`, and later ones get fresh workers, so training
    goes on."""

    def __init__(self, env_name: str, episodes: int, workers: int, seed: int = 0, sampling: Any = None):
        make_env(env_name)  # fail now, with one line, if OGBench or the environment is missing
        self.env_name, self.episodes, self.seed, self.workers = env_name, episodes, seed, max(1, workers)
        self.sampling = sampling  # a policy.ActionSampling: actions sampled; None: the policy's mean
        self._pool = evaluation_pool(workers)
        # per evaluation: its step, the pool it runs in, and its jobs
        self._pending: list[tuple[int, concurrent.futures.ProcessPoolExecutor, Jobs]] = []
        self.failed: list[int] = []  # steps whose evaluation was lost to a broken pool

    def submit(self, step: int, agent: str, metadata: dict[str, Any], params: Any) -> None:
        """Evaluate `params` (copied to the host now) on the 5 tasks in the background; a run of
        several vmapped seeds has each seed evaluated."""
        import jax

        host_params = jax.device_get(params)
        num_seeds = int(metadata.get("num_seeds", 1))
        per_seed = ([host_params] if num_seeds == 1 else
                    [jax.tree_util.tree_map(lambda x, k=k: x[k], host_params) for k in range(num_seeds)])
        chunks = episode_chunks(self.episodes, len(per_seed) * NUM_TASKS, self.workers)

        def submit_all() -> Jobs:
            return [[[self._pool.submit(evaluate_task, self.env_name, task, count, agent, metadata, seed_params,
                                        self.seed, first, self.sampling) for first, count in chunks]
                     for task in range(1, NUM_TASKS + 1)]
                    for seed_params in per_seed]

        try:
            jobs = submit_all()
        except concurrent.futures.process.BrokenProcessPool:  # broke since the last collection
            self._replace_pool(self._pool)
            jobs = submit_all()
        self._pending.append((step, self._pool, jobs))

    def _replace_pool(self, broken: concurrent.futures.ProcessPoolExecutor) -> None:
        if broken is self._pool:
            broken.shutdown(wait=False, cancel_futures=True)
            self._pool = evaluation_pool(self.workers)

    def _collect(self, step: int, pool: concurrent.futures.ProcessPoolExecutor, jobs: Jobs) -> dict[str, float] | None:
        try:
            results = [[combine([job.result() for job in task_jobs]) for task_jobs in seed_jobs]
                       for seed_jobs in jobs]  # [seed][task]
        except concurrent.futures.process.BrokenProcessPool as e:
            logger.error("evaluation at step %d on %s failed: an evaluation worker died (%s); the "
                         "evaluations after it get fresh workers", step, self.env_name, e)
            self.failed.append(step)
            self._replace_pool(pool)
            return None
        success = np.array([[r["success"] for r in seed_results] for seed_results in results])
        out = {f"eval/task{i}_success": float(v) for i, v in enumerate(success.mean(axis=0), start=1)}
        out["eval/success"] = float(success.mean())  # over tasks (and seeds)
        out["eval/length"] = float(np.mean([[r["length"] for r in seed_results] for seed_results in results]))
        out.update(end_distance_metrics([r for seed_results in results for r in seed_results]))
        if len(results) > 1:  # seed k of the run is its --seed + k
            out.update({f"eval/seed{k}_success": float(v) for k, v in enumerate(success.mean(axis=1))})
        logger.info("evaluation at step %d on %s: success %.3f", step, self.env_name, out["eval/success"])
        return out

    def _collect_oldest(self) -> tuple[int, dict[str, float] | None]:
        step, pool, jobs = self._pending.pop(0)
        return step, self._collect(step, pool, jobs)

    def poll(self) -> list[tuple[int, dict[str, float]]]:
        """Results of the evaluations that have finished, oldest first (failed ones left out)."""
        done = []
        while self._pending and all(job.done() for seed_jobs in self._pending[0][2] for task_jobs in seed_jobs
                                    for job in task_jobs):
            step, result = self._collect_oldest()
            if result is not None:
                done.append((step, result))
        return done

    def finish(self) -> Iterator[tuple[int, dict[str, float]]]:
        """Each submitted evaluation as soon as it (and those before it) finished, oldest first
        (failed ones left out), then shut the workers down. A generator, so the caller writes each
        result while later ones still run: a run killed during its final evaluation keeps the
        earlier ones."""
        try:
            while self._pending:
                step, result = self._collect_oldest()
                if result is not None:
                    yield step, result
        finally:
            self._pool.shutdown(cancel_futures=True)
