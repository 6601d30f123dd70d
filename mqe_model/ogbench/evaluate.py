"""`mqe-ogbench eval`: evaluate saved checkpoints with the OGBench protocol, away from the trainer.

    mqe-ogbench eval runs/ogbench/scene-play-v0/mqe/seed0/checkpoints/1000000 --workers 2
    mqe-ogbench eval RUN/checkpoints/800000 RUN/checkpoints/900000 RUN/checkpoints/1000000 --out eval.json
    mqe-ogbench eval RUN --temperature 0.5                                  # sampled actions

Each path is a step directory, a checkpoints root or a run directory (its latest step). Every
checkpoint gets 5 tasks x `--episodes` deterministic episodes (the trainer's evaluation, the same
episode seeds), all in one pool of `--workers` processes; the mean over the checkpoints is OGBench's
score when they are a run's last three. Only `params` and the metadata of a step are read, so the
checkpoints can come from another machine without their optimizer state.

`--temperature T` scores the policy sampled instead of its mean (`policy.ActionSampling`): the paper's
appendix says its OGBench policies sample at inference, OGBench's protocol scores the mean. The report
says which it scored.

The report is written (`--out`, JSON) after each checkpoint finishes, so an interrupted evaluation
keeps what it finished. Bad input: one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import tyro

from mqe_model import checkpoints
from mqe_model.checkpoints import CheckpointError
from mqe_model.cli_logging import setup_logging
from mqe_model.evaluation import NUM_TASKS, EvaluationUnavailable, OGBenchEvaluator, make_env


class EvalError(Exception):
    """The evaluation cannot run as asked; the message says why. (Not a ValueError: tyro would catch
    one raised while it builds the config and print a box instead of our one line.)"""


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Evaluate saved checkpoints on an OGBench environment (5 tasks, deterministic actions unless asked)."""

    paths: Annotated[tuple[Path, ...], tyro.conf.Positional, tyro.conf.arg(metavar="CHECKPOINT")]  # step directories, checkpoints roots or run directories (latest step)
    env: str | None = None  # OGBench environment; None: the one the run evaluated on (--eval-env)
    episodes: int = 50  # episodes per task (OGBench: 50)
    workers: int = 2  # evaluation processes
    seed: int = 0  # episode seeds start here (the trainer uses its --seed)
    temperature: float = 0.0  # 0: the policy's mean (OGBench's protocol); > 0: actions sampled, std x this
    out: Path | None = None  # JSON report, rewritten after each checkpoint; None: print only

    def __post_init__(self) -> None:
        if not self.paths:
            raise EvalError("give at least one checkpoint path")
        if self.episodes < 1 or self.workers < 1:
            raise EvalError(f"--episodes and --workers must be >= 1, got {self.episodes} and {self.workers}")
        if not self.temperature >= 0:
            raise EvalError(f"--temperature {self.temperature}: 0 (the policy's mean) or > 0 (sampled actions)")


def load_checkpoint(path: Path) -> tuple[Path, dict[str, Any], Any]:
    """(step dir, metadata, params) of a path, checked for what the evaluation needs."""
    step_dir = checkpoints.resolve_step_dir(path)
    metadata = checkpoints.read_metadata(step_dir)
    if metadata.get("image") is not None:
        raise EvalError(f"{step_dir}: an image policy; OGBench's state-based environments need a state policy")
    return step_dir, metadata, checkpoints.restore_params(step_dir)


def environment_of(cfg: EvalConfig, metadata: dict[str, Any], step_dir: Path) -> str:
    """--env, or the run's own evaluation environment."""
    env = cfg.env or (metadata.get("train") or {}).get("eval_env")
    if not env:
        raise EvalError(f"{step_dir}: the run names no evaluation environment; pass --env")
    return env


def observation_shape(env_name: str) -> list[int]:
    observation, _ = make_env(env_name).reset(seed=0)
    return list(np.shape(observation))


def evaluate(cfg: EvalConfig, command: str = "") -> dict[str, Any]:
    """Evaluate every checkpoint; the report (also written to --out after each one)."""
    from mqe_model.policy import ActionSampling

    sampling = ActionSampling(cfg.temperature) if cfg.temperature else None
    loaded = [load_checkpoint(path) for path in cfg.paths]
    env_name = environment_of(cfg, loaded[0][1], loaded[0][0])
    shape = observation_shape(env_name)
    for step_dir, metadata, _ in loaded:
        if environment_of(cfg, metadata, step_dir) != env_name:
            raise EvalError(f"{step_dir}: evaluated on {metadata['train']['eval_env']}, not {env_name}; "
                            "pass --env to evaluate all on one environment")
        if list(metadata["observation"]["shape"]) != shape:
            raise EvalError(f"{step_dir}: observations of shape {metadata['observation']['shape']}, but {env_name} "
                            f"gives {shape}; wrong --env?")
    report: dict[str, Any] = {
        "env": env_name, "episodes_per_task": cfg.episodes, "seed": cfg.seed,
        "policy": policy_description(sampling),
        "checkpoints": [], "command": command,
    }
    evaluator = OGBenchEvaluator(env_name, cfg.episodes, cfg.workers, cfg.seed, sampling)
    start = time.perf_counter()
    try:
        for step_dir, metadata, params in loaded:  # one at a time: a failure is then known by its checkpoint
            evaluator.submit(int(metadata["step"]), metadata["agent"], metadata, params)
            while not (done := evaluator.poll()) and not evaluator.failed:
                time.sleep(0.2)
            if evaluator.failed:
                raise EvalError(f"{step_dir}: its evaluation failed, an evaluation worker died (out of memory?); "
                                f"the {len(report['checkpoints'])} finished before it are in the report")
            (step, result), = done
            report["checkpoints"].append(checkpoint_entry(step_dir, metadata, result))
            report["success_mean"] = float(np.mean([c["success"] for c in report["checkpoints"]]))
            report["seconds"] = time.perf_counter() - start
            write_report(cfg.out, report)
    finally:
        list(evaluator.finish())  # nothing pending: shuts the workers down
    return report


def policy_description(sampling: Any) -> str:
    """Which action rule the report scored, in words."""
    if sampling is None:
        return "actor (OGBench protocol: deterministic actions)"
    return (f"actor sampled at temperature {sampling.temperature:g}: clip(mean + {sampling.temperature:g} x std x "
            "noise) (not OGBench's protocol)")


def checkpoint_entry(step_dir: Path, metadata: dict[str, Any], result: dict[str, float]) -> dict[str, Any]:
    """One checkpoint's line of the report, success rates in %."""
    entry = {"path": str(step_dir), "agent": metadata["agent"], "step": int(metadata["step"]),
             "success": 100 * result["eval/success"], "length": result["eval/length"],
             "tasks": [100 * result[f"eval/task{i}_success"] for i in range(1, NUM_TASKS + 1)]}
    entry.update({key.removeprefix("eval/"): value for key, value in result.items()
                  if key.startswith("eval/end_distance_")})  # MQE: the critic's distance at the last step
    seeds = int(metadata.get("num_seeds", 1))
    if seeds > 1:
        entry["seeds"] = [100 * result[f"eval/seed{k}_success"] for k in range(seeds)]
    return entry


def write_report(out: Path | None, report: dict[str, Any]) -> None:
    if out is None:
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(partial, out)


def format_table(report: dict[str, Any]) -> str:
    """A line per checkpoint: step, success %, per-task success %; then the mean."""
    lines = [f"{report['env']}, {report['episodes_per_task']} episodes per task; policy: {report['policy']}",
             f"{'step':>8} {'success %':>9}  tasks 1-{NUM_TASKS} (%)   checkpoint"]
    for c in report["checkpoints"]:
        tasks = " ".join(f"{t:5.1f}" for t in c["tasks"])
        lines.append(f"{c['step']:>8} {c['success']:>9.1f}  {tasks}   {c['path']}")
        if "end_distance_failure" in c or "end_distance_success" in c:
            lines.append(f"{'':>8} critic's distance to the goal at the last step (steps): successes "
                         f"{c.get('end_distance_success', float('nan')):.1f}, failures "
                         f"{c.get('end_distance_failure', float('nan')):.1f}")
    if report["checkpoints"]:
        lines.append(f"mean over {len(report['checkpoints'])} checkpoint(s): {report['success_mean']:.1f} % "
                     f"({report['seconds']:.0f} s)")
    return "\n".join(lines)


def run(cfg: EvalConfig, command: str) -> int:
    """`mqe-ogbench eval`: evaluate and print the table; the exit code (2 for bad input)."""
    setup_logging(timestamps=False, absl_level=logging.ERROR)
    try:
        report = evaluate(cfg, command)
    except (EvalError, CheckpointError, EvaluationUnavailable) as e:
        print(f"mqe-ogbench eval: error: {e}", file=sys.stderr)
        return 2
    print(format_table(report))
    return 0
