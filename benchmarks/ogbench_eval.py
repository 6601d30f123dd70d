"""Cost of OGBench evaluation on the CPU: one task's episodes, as an evaluation worker runs them.

    python -m benchmarks.ogbench_eval --env pointmaze-giant-navigate-v0 --episodes 50

Writes a randomly initialised state-based checkpoint of `--preset` for the environment's observation
and action sizes (untrained: the episodes run to their time limit, the most expensive case), then
times `mqe_model.evaluation.evaluate_task` for one task and prints the wall time, the time per
episode-step (policy + environment) and the time to make one environment. Needs `ogbench`.
"""

from __future__ import annotations

import dataclasses
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
    task: int = 1  # task id, 1..5


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
    start = time.perf_counter()
    result = evaluate_task(args.env, args.task, args.episodes, args.agent, metadata, params, seed=0)
    seconds = time.perf_counter() - start
    steps = result["length"] * args.episodes
    print(f"{args.env} task {args.task}, {args.episodes} episodes of an untrained {args.agent} {args.preset} "
          f"policy: {seconds:.1f} s, {steps:.0f} episode-steps, {seconds / steps * 1e3:.3f} ms per episode-step; "
          f"making one environment: {make_seconds * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
