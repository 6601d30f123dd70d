"""Cost of OGBench evaluation on the CPU: one task's episodes, as an evaluation worker runs them.

    python -m benchmarks.ogbench_eval --env pointmaze-giant-navigate-v0 --episodes 50
    python -m benchmarks.ogbench_eval --env scene-play-v0 --episodes 5 --workers 8 --jobs 16

Writes a randomly initialised state-based checkpoint of `--preset` for the environment's observation
and action sizes (untrained: the episodes run to their time limit, the most expensive case), then
times `mqe_model.evaluation.evaluate_task` for one task and prints the wall time, the time per
episode-step (policy + environment) and the time to make one environment. Needs `ogbench`.

With `--workers N`, `--jobs` such task evaluations (tasks 1..5 in turn) run in N worker processes
set up as the training loop's evaluator sets them up, once with XLA's default thread pool per worker
and once with one thread per worker (what `OGBenchEvaluator` uses), and it prints the episode-steps
per second of each and their ratio: how much the thread pools of many workers cost when they share
the cores.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

import tyro


@dataclasses.dataclass(frozen=True)
class Args:
    """Evaluation cost of one task."""

    env: str = "pointmaze-giant-navigate-v0"  # OGBench environment
    agent: str = "mqe"  # mqe, gcbc or gciql
    preset: str = "ogbench_state"  # state-based preset of the random checkpoint
    episodes: int = 50  # episodes of the task (OGBench: 50)
    task: int = 1  # task id, 1..5 (one worker; with --workers the jobs cycle through tasks 1..5)
    workers: int = 1  # evaluation processes; above 1 compares per-worker thread settings
    jobs: int = 0  # task evaluations spread over the workers; 0: 2 x workers


def main(argv: list[str] | None = None) -> int:
    """Run and print the figures."""
    args = tyro.cli(Args, args=argv)
    from mqe_model import checkpoints
    from mqe_model.evaluation import EvaluationUnavailable, evaluate_task, make_env
    from mqe_model.policy import load_policy
    from server.random_checkpoint import write_random_checkpoint

    try:
        env = make_env(args.env)
    except EvaluationUnavailable as e:
        print(f"ogbench_eval: error: {e}", file=sys.stderr)
        return 2
    state_dim, action_dim = env.observation_space.shape[0], env.action_space.shape[0]
    start = time.perf_counter()
    make_env(args.env)  # a second one: the first also paid for the imports
    make_seconds = time.perf_counter() - start
    step_dir = write_random_checkpoint(Path(tempfile.mkdtemp(prefix="eval-bench-")), args.agent, args.preset, (),
                                       None, state_dim=state_dim, action_dim=action_dim)
    metadata = checkpoints.read_metadata(step_dir)
    params = load_policy(step_dir).params
    if args.workers > 1:
        return compare_worker_threads(args, metadata, params)
    start = time.perf_counter()
    result = evaluate_task(args.env, args.task, args.episodes, args.agent, metadata, params, seed=0)
    seconds = time.perf_counter() - start
    steps = result["length"] * args.episodes
    print(f"{args.env} task {args.task}, {args.episodes} episodes of an untrained {args.agent} {args.preset} "
          f"policy: {seconds:.1f} s, {steps:.0f} episode-steps, {seconds / steps * 1e3:.3f} ms per episode-step; "
          f"making one environment: {make_seconds * 1e3:.0f} ms")
    return 0


def compare_worker_threads(args: Args, metadata: dict, params: object) -> int:
    """Episode-steps per second of `--jobs` task evaluations on `--workers` processes, both thread settings."""
    from mqe_model.evaluation import NUM_TASKS, evaluate_task, init_worker

    jobs = args.jobs or 2 * args.workers
    rates = {}
    for single_thread in (False, True):
        with concurrent.futures.ProcessPoolExecutor(
                args.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=functools.partial(init_worker, single_thread)) as pool:
            list(pool.map(time.sleep, [0.5] * args.workers))  # workers started before the clock runs
            start = time.perf_counter()
            futures = [pool.submit(evaluate_task, args.env, job % NUM_TASKS + 1, args.episodes, args.agent, metadata,
                                   params, 0) for job in range(jobs)]
            results = [future.result() for future in futures]
            seconds = time.perf_counter() - start
        steps = sum(r["length"] * args.episodes for r in results)
        rates[single_thread] = steps / seconds
        label = "one thread per worker" if single_thread else "XLA default threads"
        print(f"{args.env}: {jobs} jobs x {args.episodes} episodes on {args.workers} workers, {label}: "
              f"{seconds:.1f} s, {rates[single_thread]:.0f} episode-steps/s")
    print(f"one thread per worker / default: {rates[True] / rates[False]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
