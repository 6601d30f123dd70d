"""`mqe-ogbench train`: one row of the paper's OGBench table, reproduced end to end.

    mqe-ogbench train scene-play-v0 --agent mqe --seeds 0 1 2 3 4 5 6 7
    mqe-ogbench train pointmaze-giant-stitch-v0 --agent gciql --seeds 0 1 2 3
    mqe-ogbench train puzzle-4x4-play-v0 --seeds 0 1 2 3 --vmap-seeds   # one run, 4 seeds at once
    mqe-ogbench train scene-play-v0 --seeds 0 1 2 3 --gpus 0 1 2 3      # 4 runs at once, one per GPU
    mqe-ogbench train scene-play-v0 --seeds 0 1 2 3 --gpus 0 --runs-per-gpu 4   # 4 runs at once on one GPU

For the dataset it generates the data if missing (`mqe-ogbench data`, or takes `--data`), trains one
`mqe-train` run per seed (a subprocess, so the exact command is recorded and re-runnable; MQE gets
the paper's alpha for the environment; with `--vmap-seeds`, one run trains all seeds at once with
`jax.vmap`, which costs little more than one seed for the state-based presets), evaluates with OGBench's protocol through mqe-train's
evaluation hook (5 tasks x 50 episodes, deterministic actions, every `--eval-every` updates) and
scores each seed by the mean success of its last 3 evaluations. The row (mean and standard error
over seeds, time per run, the commands) goes to `<out>.json` and `<out>.md`. Re-running resumes
unfinished runs (`mqe-train --resume`). With `--gpus`, the runs go at once, each alone on one of the
listed GPUs (`CUDA_VISIBLE_DEVICES`), each writing its output to `<run directory>.log`; with
`--vmap-seeds` too, the consecutive seeds are split into one vmapped run per GPU. `--runs-per-gpu N`
lets N runs share each GPU (each with 1/N of its memory); processes on one GPU take turns, so for
state-based MQE this is slower in total than one run per GPU (docs/performance.md). When there are
more runs than GPUs, a GPU takes its next run as soon as a run's updates end (`trained.json` in its
run directory), while that run's last evaluations go on on the CPUs (`--no-handoff`: after them).
Bad input: one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import tyro

from mqe_model.cli_logging import setup_logging
from mqe_model.metrics import TRAINED_FILE, read_evaluations
from mqe_model.ogbench import generate
from mqe_model.ogbench.gpus import gpu_env, on_free_gpus, wait_for_run

logger = logging.getLogger(__name__)

SCORED_EVALUATIONS = 3  # OGBench protocol: the score is the mean over the last 3 evaluations
# Paper (MQE), appendix table "BC coefficient alpha for each environment"; first match wins, so the
# `*-noisy` rule comes before the visual one (visual noisy datasets use 0.1).
PAPER_ALPHA = (
    (lambda name: name.endswith("-noisy"), 0.1),
    (lambda name: name.startswith("visual-antmaze"), 0.3),
    (lambda name: name.startswith("visual-"), 3.0),
    (lambda name: name.startswith("antmaze") and name.endswith("-navigate"), 0.1),
    (lambda name: name.startswith("antmaze") and name.endswith("-stitch"), 0.03),
    (lambda name: name.startswith("antmaze") and name.endswith("-explore"), 0.003),
    (lambda name: name.startswith("humanoidmaze"), 0.01),
    (lambda name: name.startswith("pointmaze"), 0.03),
    (lambda name: name.startswith(("cube", "puzzle", "scene")) and name.endswith("-play"), 1.0),
)
# The baselines as OGBench trains them (its `impls/hyperparameters.sh` and agent configs): GCIQL extracts
# its policy with DDPG+BC, BC weight per family; both baselines use batch 1024 on state-based datasets and
# a policy MLP without LayerNorm; GCIQL uses discount 0.995 on giant mazes (OGBench's default is 0.99,
# our GCIQL preset's too).
OGBENCH_GCIQL_ALPHA = (
    (lambda name: name.startswith("pointmaze"), 0.003),
    (lambda name: name.startswith("antmaze"), 0.3),
    (lambda name: name.startswith(("cube", "puzzle", "scene")) and name.endswith("-play"), 1.0),
    (lambda name: name.startswith(("cube", "puzzle", "scene")) and name.endswith("-noisy"), 0.03),
)
OGBENCH_BASELINE_BATCH = 1024
# Paper, table "OGBench Evaluation" (tab:ogbench): success % (mean, standard error over 8 seeds for
# state-based tasks); only the rows this reproduction targets.
PAPER_RESULTS = {
    ("mqe", "pointmaze-giant-navigate-v0"): (72.8, 2.5),
    ("mqe", "pointmaze-giant-stitch-v0"): (59.2, 3.2),
    ("mqe", "puzzle-4x4-play-v0"): (18.7, 2.3),
    ("mqe", "scene-play-v0"): (76.8, 2.1),
    ("gciql", "pointmaze-giant-navigate-v0"): (0.0, 0.0),
    ("gciql", "pointmaze-giant-stitch-v0"): (0.0, 0.0),
    ("gciql", "puzzle-4x4-play-v0"): (25.7, 1.1),
    ("gciql", "scene-play-v0"): (51.3, 1.5),
}


# OGBench's published commands for stitch datasets give the value-based agents half their actor goals
# from random dataset states (`actor_p_trajgoal=0.5 actor_p_randomgoal=0.5`): a stitch trajectory
# spans ~4 maze cells, so its future states alone never show the actor a goal as far as an evaluation
# task's. Without it, MQE scores 0% on pointmaze-giant-stitch although its critic ranks geodesic
# distances well.
STITCH_ACTOR_P_RANDOM_GOAL = 0.5
STITCH_RANDOM_GOAL_AGENTS = ("mqe", "gciql")


class ReproduceError(ValueError):
    """The reproduction cannot run as asked; the message says why and what to do."""


def paper_alpha(dataset: str) -> float:
    """MQE's behaviour-cloning weight for an OGBench dataset (name with or without `-v0`)."""
    return _alpha(PAPER_ALPHA, dataset, "the paper gives no MQE alpha for it")


def ogbench_gciql_alpha(dataset: str) -> float:
    """GCIQL's DDPG+BC weight in OGBench's published commands (name with or without `-v0`)."""
    return _alpha(OGBENCH_GCIQL_ALPHA, dataset, "no OGBench GCIQL alpha is known here for it")


def _alpha(table: tuple, dataset: str, missing: str) -> float:
    base = dataset.removesuffix("-v0")
    for matches, alpha in table:
        if matches(base):
            return alpha
    raise ReproduceError(f"{dataset}: {missing}; add it to mqe_model/ogbench/reproduce.py")


@dataclasses.dataclass(frozen=True)
class ReproduceConfig:
    """Generate (if missing), train and evaluate one OGBench dataset over several seeds."""

    # OGBench dataset name, e.g. scene-play-v0
    dataset: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="DATASET")]
    agent: Literal["mqe", "gcbc", "gciql"] = "mqe"  # algorithm
    seeds: tuple[int, ...] = (0,)  # training seeds (the paper: 8 for state-based tasks)
    vmap_seeds: bool = False  # train the seeds in one run with jax.vmap (mqe-train --num-seeds); consecutive seeds
    gpus: tuple[str, ...] = ()  # GPU ids (CUDA_VISIBLE_DEVICES) to run the seeds' runs on at once, one run per GPU; () runs them one after another
    runs_per_gpu: int = 1  # runs sharing each of --gpus at once, each with 1/N of its memory (slower in total than one run per GPU for state-based MQE)
    handoff: bool = True  # with --gpus: a GPU's next run starts once a run's updates end, its last evaluations going on on the CPUs (runs then take GPU memory as needed, not 75% up front)
    steps: int = 1_000_000  # updates per run (the paper: 1M state-based)
    preset: str = "ogbench_state"  # agent preset of mqe-train
    set: tuple[str, ...] = ()  # further agent overrides, key=value, applied after the paper's alpha
    eval_every: int = 100_000  # updates between evaluations (the last step is always evaluated)
    eval_start: int = 0  # updates before the first evaluation (e.g. steps - 2 x eval-every: only the scored 3)
    eval_episodes: int = 50  # episodes per task, 5 tasks (OGBench: 50)
    eval_workers: int = 5  # evaluation processes per run (one per task keeps up with a GPU)
    data: Path | None = None  # dataset .npz to train on; None: <data-dir>/<dataset>.npz, generated if missing
    data_dir: Path = Path("data/ogbench")  # where generated datasets live
    data_seed: int = 0  # seed of a dataset generated here (one dataset for all training seeds)
    data_workers: int = 2  # processes generating the dataset
    data_episodes: int | None = None  # episodes of a generated dataset; None: official (tiny runs only)
    data_length: int | None = None  # steps per episode of a generated dataset; None: official
    runs_dir: Path = Path("runs/ogbench")  # run directories: <runs-dir>/<dataset>/<agent>/seed<N>
    out: Path | None = None  # row files <out>.json and <out>.md; None: <runs-dir>/<dataset>/<agent>
    overwrite: bool = False  # retrain existing runs from scratch instead of resuming them
    progress: bool = True  # progress bars of generation and training

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ReproduceError("--seeds: give at least one seed")
        if len(set(self.seeds)) != len(self.seeds):
            raise ReproduceError(f"--seeds {' '.join(map(str, self.seeds))}: seeds repeat")
        if self.vmap_seeds and list(self.seeds) != list(range(self.seeds[0], self.seeds[0] + len(self.seeds))):
            raise ReproduceError(f"--vmap-seeds trains seeds --seed, --seed + 1, ...: give consecutive seeds, "
                                 f"not {' '.join(map(str, self.seeds))}")
        if min(self.steps, self.eval_every, self.eval_episodes) < 1:
            raise ReproduceError("--steps, --eval-every and --eval-episodes must be >= 1")
        if len(set(self.gpus)) != len(self.gpus) or not all(gpu.isdigit() for gpu in self.gpus):
            raise ReproduceError(f"--gpus {' '.join(self.gpus)}: give distinct GPU numbers as nvidia-smi lists them, "
                                 "e.g. --gpus 0 1")
        if not 0 <= self.eval_start <= self.steps:
            raise ReproduceError(f"--eval-start {self.eval_start}: must be within [0, --steps {self.steps}]")
        if self.runs_per_gpu < 1 or (self.runs_per_gpu > 1 and not self.gpus):
            raise ReproduceError(f"--runs-per-gpu {self.runs_per_gpu}: give a count >= 1, and name the GPUs to share "
                                 "with --gpus (e.g. --gpus 0 --runs-per-gpu 4)")

    @property
    def gpu_slots(self) -> tuple[str, ...]:
        """One entry per run that may go at once: each GPU of --gpus, --runs-per-gpu times."""
        return tuple(gpu for gpu in self.gpus for _ in range(self.runs_per_gpu))


def check_existing_sizes(settings_path: Path, wanted: generate.DatasetSpec) -> None:
    """Refuse a dataset generated earlier with other sizes (a tiny test file must not pass for the real one)."""
    if not settings_path.is_file():
        logger.info("%s: no settings file; taking the data as an official OGBench file", settings_path)
        return
    settings = json.loads(settings_path.read_text())
    have = (settings.get("episodes"), settings.get("length"))
    if have != (wanted.episodes, wanted.length):
        raise ReproduceError(f"{settings_path}: the existing dataset has {have[0]} episodes x {have[1]} steps, not "
                             f"{wanted.episodes} x {wanted.length}; regenerate it (mqe-ogbench data {wanted.name} "
                             "--overwrite) or pass matching --data-episodes/--data-length")


def ensure_data(cfg: ReproduceConfig, dataset: str) -> tuple[Path, str | None]:
    """The dataset file to train on and the generation command when it was generated now."""
    if cfg.data is not None:
        if not cfg.data.is_file():
            raise ReproduceError(f"--data {cfg.data}: no such file")
        return cfg.data, None
    paths = generate.output_paths(cfg.data_dir, dataset)
    path = paths["train"]
    if path.is_file():
        check_existing_sizes(paths["settings"], generate.dataset_spec(dataset, cfg.data_episodes, cfg.data_length))
        logger.info("using existing %s", path)
        return path, None
    gen = generate.GenerateConfig(dataset, cfg.data_dir, cfg.data_seed, cfg.data_episodes, cfg.data_length,
                                  cfg.data_workers, overwrite=False, progress=cfg.progress)
    command = ["mqe-ogbench", "data", dataset, "--out-dir", str(cfg.data_dir), "--seed", str(cfg.data_seed),
               "--workers", str(cfg.data_workers)]
    command += ["--episodes", str(cfg.data_episodes)] if cfg.data_episodes else []
    command += ["--length", str(cfg.data_length)] if cfg.data_length else []
    try:
        generate.generate(gen)
    except generate.GenerateError as e:
        raise ReproduceError(str(e)) from None
    return path, shlex.join(command)


def checkpoint_interval(eval_every: int) -> int:
    """mqe-train's --save-every: every 50k updates when that lands on each evaluation, else at each one.

    The training loop runs updates in chunks that end only at checkpoint steps, and evaluates at chunk
    ends; checkpoint steps that include every multiple of --eval-every keep evaluations on schedule.
    """
    default = 50_000
    return min(eval_every, default) if default % eval_every == 0 or eval_every % default == 0 else eval_every


def checkpoints_to_keep(steps: int, eval_every: int, eval_start: int, save_every: int) -> int:
    """mqe-train's --keep: every checkpoint from the first scored evaluation on, so a run stopped while
    its evaluations queue behind the training can evaluate them from checkpoints when resumed."""
    last_multiple = (steps - 1) // eval_every * eval_every
    scored = [steps] + [m for m in (last_multiple, last_multiple - eval_every) if m > 0 and m >= eval_start]
    first = min(scored)
    saves = steps // save_every - (first - 1) // save_every + (1 if steps % save_every else 0)
    return max(3, saves)


def protocol_overrides(agent: str, dataset: str) -> list[str]:
    """The agent settings OGBench's protocol fixes for a dataset: MQE's alpha from the paper; the
    baselines' batch and policy MLP, GCIQL's DDPG+BC and its alpha and giant-maze discount from OGBench;
    random actor goals on stitch datasets for the value-based agents. `--set` comes after and wins."""
    base = dataset.removesuffix("-v0")
    overrides = [f"alpha={paper_alpha(dataset)}"] if agent == "mqe" else []
    if agent in ("gciql", "gcbc") and not base.startswith("visual-"):
        overrides.append(f"batch_size={OGBENCH_BASELINE_BATCH}")
    if agent == "gcbc":
        overrides.append("layer_norm=false")
    if agent == "gciql":
        overrides += ["actor_loss=ddpgbc", f"alpha={ogbench_gciql_alpha(dataset)}", "actor_layer_norm=false"]
        overrides += ["gamma=0.995"] if "-giant-" in base else []
    if agent in STITCH_RANDOM_GOAL_AGENTS and base.endswith("-stitch"):
        overrides.append(f"actor_p_random_goal={STITCH_ACTOR_P_RANDOM_GOAL}")
    return overrides


def train_command(cfg: ReproduceConfig, dataset: str, data: Path, seed: int, workdir: Path,
                  num_seeds: int = 1) -> list[str]:
    """The mqe-train command line of one run (seeds seed .. seed + num_seeds - 1)."""
    overrides = protocol_overrides(cfg.agent, dataset) + list(cfg.set)
    save_every = min(checkpoint_interval(cfg.eval_every), cfg.steps)
    command = [sys.executable, "-m", "mqe_model.train", "--agent", cfg.agent, "--preset", cfg.preset,
               "--data", str(data), "--workdir", str(workdir), "--steps", str(cfg.steps), "--seed", str(seed),
               "--eval-env", dataset, "--eval-every", str(cfg.eval_every), "--eval-start", str(cfg.eval_start),
               "--eval-episodes", str(cfg.eval_episodes), "--eval-workers", str(cfg.eval_workers),
               "--log-every", str(min(1000, cfg.steps)),
               "--save-every", str(save_every),
               "--keep", str(checkpoints_to_keep(cfg.steps, cfg.eval_every, cfg.eval_start, save_every)),
               "--overwrite" if cfg.overwrite else "--resume"]
    command += ["--num-seeds", str(num_seeds)] if num_seeds > 1 else []
    command += ["--set", *overrides] if overrides else []
    return command + ([] if cfg.progress else ["--no-progress"])


def seed_score(evaluations: list[dict[str, Any]], key: str = "eval/success") -> float:
    """OGBench's score of one run: mean success over its last 3 evaluations."""
    return float(np.mean([row[key] for row in evaluations[-SCORED_EVALUATIONS:]]))


RUN_DIR_NAME = re.compile(r"seed\d+|seeds\d+-\d+")  # the names `run_name` gives


def run_name(seeds: list[int]) -> str:
    """The run directory of one seed (`seed3`) or of consecutive vmapped seeds (`seeds0-3`)."""
    return f"seed{seeds[0]}" if len(seeds) == 1 else f"seeds{seeds[0]}-{seeds[-1]}"


def run_seeds(name: str) -> list[int]:
    """The seeds a run directory named by `run_name` trains."""
    first, _, last = name.removeprefix("seeds").removeprefix("seed").partition("-")
    return list(range(int(first), int(last or first) + 1))


def success_key(index: int, num_seeds: int) -> str:
    """The metrics.jsonl key of seed `index`'s evaluation success in a run of `num_seeds` seeds."""
    return "eval/success" if num_seeds == 1 else f"eval/seed{index}_success"


def seed_groups(seeds: list[int], vmap_seeds: bool, num_gpus: int) -> list[list[int]]:
    """The seeds of each mqe-train run: one seed per run, or with `vmap_seeds` consecutive blocks, one
    block per GPU (as even as the count allows) when several GPUs run them at once."""
    if not vmap_seeds:
        return [[seed] for seed in seeds]
    return [[int(seed) for seed in block] for block in np.array_split(seeds, min(max(num_gpus, 1), len(seeds)))]


def train_run(cfg: ReproduceConfig, dataset: str, data: Path, seeds: list[int],
              gpu: str | None = None, on_trained: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Train and evaluate `seeds` (one seed, or consecutive seeds vmapped) in one mqe-train subprocess;
    each seed's score and evaluation history. With `gpu`, the run sees that GPU alone and its output
    goes to `<run directory>.log` (runs on other GPUs print at the same time); with `--handoff`,
    `on_trained` is called as soon as the run's updates are done (see `wait_for_run`)."""
    name = run_name(seeds)
    workdir = cfg.runs_dir / dataset / cfg.agent / name
    command = train_command(cfg, dataset, data, seeds[0], workdir, len(seeds))
    logger.info("%s%s: %s", name, "" if gpu is None else f" on GPU {gpu}", shlex.join(command))
    resumed = not cfg.overwrite and (workdir / "checkpoints").is_dir()
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    log = None if gpu is None else workdir.with_name(name + ".log")
    start = time.perf_counter()
    if log is None:
        returncode = subprocess.run(command, env=env, check=False).returncode
    else:
        log.parent.mkdir(parents=True, exist_ok=True)
        trained_file = workdir / TRAINED_FILE
        trained_file.unlink(missing_ok=True)  # an earlier invocation's; this one writes its own
        with open(log, "a") as output, subprocess.Popen(
                command, env={**env, **gpu_env(gpu, cfg.runs_per_gpu, cfg.handoff)}, stdout=output,
                stderr=subprocess.STDOUT) as process:
            try:
                returncode = wait_for_run(process, trained_file, on_trained if cfg.handoff else None)
            except BaseException:  # as subprocess.run does: the run does not outlive this process
                process.kill()
                raise
    seconds = time.perf_counter() - start
    if returncode != 0:
        where = "its output above" if log is None else str(log)
        raise ReproduceError(f"{name}: mqe-train exited with {returncode}; {where} says why "
                             f"(re-run this command to resume: {shlex.join(command)})")
    runs = []
    for index, seed in enumerate(seeds):
        key = success_key(index, len(seeds))
        evaluations = read_evaluations(workdir, key)
        if not evaluations or evaluations[-1]["step"] != cfg.steps:
            raise ReproduceError(f"{workdir}: metrics.jsonl has no evaluation at step {cfg.steps}; "
                                 "the run did not finish its final evaluation")
        if len(evaluations) < SCORED_EVALUATIONS:
            logger.warning("seed %d: only %d evaluation(s); the score averages fewer than %d", seed,
                           len(evaluations), SCORED_EVALUATIONS)
        # A resumed run's seconds cover this invocation only (a finished run is just re-scored); a vmapped
        # run's seconds are shared by its seeds.
        runs.append({"seed": seed, "workdir": str(workdir), "command": shlex.join(command),
                     "seconds": round(seconds, 1), "resumed": resumed, "vmapped_with": len(seeds),
                     "score": seed_score(evaluations, key),
                     "evaluations": [{"step": row["step"], "success": row[key]} for row in evaluations]})
    return runs


def standard_error(scores: np.ndarray) -> float | None:
    """Standard error of the mean over seeds (None for one seed)."""
    return float(scores.std(ddof=1) / np.sqrt(len(scores))) if len(scores) > 1 else None


def summarize(cfg: ReproduceConfig, dataset: str, data: Path, generated_by: str | None,
              runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The table row: success % mean and standard error over seeds, with everything behind it. Runs are
    listed in seed order, whichever finished first."""
    runs = sorted(runs, key=lambda run: run["seed"])
    scores = 100.0 * np.array([run["score"] for run in runs])
    sem = standard_error(scores)
    settings_path = data.with_suffix(".json")
    data_settings = json.loads(settings_path.read_text()) if settings_path.is_file() else None
    paper = PAPER_RESULTS.get((cfg.agent, dataset))
    return {
        "dataset": dataset, "agent": cfg.agent, "preset": cfg.preset,
        "alpha": paper_alpha(dataset) if cfg.agent == "mqe" else None,
        "protocol_overrides": protocol_overrides(cfg.agent, dataset), "overrides": list(cfg.set),
        "steps": cfg.steps, "seeds": list(cfg.seeds), "vmap_seeds": cfg.vmap_seeds, "gpus": list(cfg.gpus),
        "success_mean": float(scores.mean()), "success_sem": sem, "success_per_seed": scores.tolist(),
        "paper": {"mean": paper[0], "sem": paper[1]} if paper else None,
        "protocol": {"tasks": 5, "episodes_per_task": cfg.eval_episodes, "eval_every": cfg.eval_every,
                     "eval_start": cfg.eval_start,
                     "scored_evaluations": SCORED_EVALUATIONS, "actions": "deterministic"},
        "data": {"path": str(data), "generated_by": generated_by, "settings": data_settings},
        "seconds_per_run": float(np.mean([run["seconds"] for run in runs])), "runs": runs,
    }


def markdown_row(row: dict[str, Any]) -> str:
    """One Markdown table line: dataset, agent, ours, paper, seeds, steps, MuJoCo, time per run and the
    `--set` overrides beyond the protocol (a row trained with other settings must say so)."""
    sem = f" ± {row['success_sem']:.1f}" if row["success_sem"] is not None else ""
    paper = f"{row['paper']['mean']:.1f} ± {row['paper']['sem']:.1f}" if row["paper"] else "—"
    settings = row["data"]["settings"] or {}
    seconds = row["seconds_per_run"]
    duration = f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"
    if row.get("vmap_seeds") and len(row["seeds"]) > 1:
        duration += f" ({len(row['seeds'])} seeds at once)"
    if len(row.get("gpus", [])) > 1:
        duration += f", runs on {len(row['gpus'])} GPUs at once"
    return (f"| {row['dataset']} | {row['agent']} | {row['success_mean']:.1f}{sem} | {paper} | "
            f"{len(row['seeds'])} | {row['steps']} | {settings.get('mujoco_version', 'official file')} | "
            f"{duration} | {' '.join(row.get('overrides') or []) or '—'} |")


MARKDOWN_HEADER = ("| dataset | agent | ours (success %, mean ± s.e.) | paper | seeds | steps | MuJoCo "
                   "| time per run | --set beyond the protocol |\n"
                   "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def train_groups(cfg: ReproduceConfig, dataset: str, data: Path,
                 groups: list[list[int]]) -> list[list[dict[str, Any]]]:
    """Each group's runs, in order: one after another, or with `--gpus` at once, each group on a free
    GPU slot (`--runs-per-gpu` slots per GPU). With `--gpus`, every run goes to its end before a failure
    is reported."""
    if not cfg.gpus:
        return [train_run(cfg, dataset, data, seeds) for seeds in groups]
    futures = on_free_gpus(cfg.gpu_slots, [functools.partial(train_run, cfg, dataset, data, seeds) for seeds in groups])
    failures = [str(future.exception()) for future in futures if future.exception() is not None]
    if failures:
        raise ReproduceError("; ".join(failures))
    return [future.result() for future in futures]


def dataset_name(cfg: ReproduceConfig) -> str:
    """The dataset's versioned name (no work; an unknown dataset to generate raises GenerateError)."""
    return generate.dataset_spec(cfg.dataset).name if cfg.data is None else generate.versioned_name(cfg.dataset)


def prepare(cfg: ReproduceConfig) -> tuple[str, Path, str | None]:
    """The dataset's versioned name, the data file (generated if missing) and the generation command
    when it was generated now; an unknown dataset or one that cannot be evaluated fails before any work."""
    dataset = dataset_name(cfg)
    protocol_overrides(cfg.agent, dataset)
    from mqe_model.evaluation import EvaluationUnavailable, make_env

    try:
        make_env(dataset)
    except EvaluationUnavailable as e:
        raise ReproduceError(str(e)) from None
    data, generated_by = ensure_data(cfg, dataset)
    return dataset, data, generated_by


def write_row(cfg: ReproduceConfig, dataset: str, row: dict[str, Any]) -> Path:
    """`<out>.json` and `<out>.md` (default out: <runs-dir>/<dataset>/<agent>); returns the JSON's path."""
    out = cfg.out or cfg.runs_dir / dataset / cfg.agent
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out.with_name(out.name + ".json"), out.with_name(out.name + ".md")
    json_path.write_text(json.dumps(row, indent=2) + "\n")
    md_path.write_text(f"{MARKDOWN_HEADER}\n{markdown_row(row)}\n")
    return json_path


def reproduce(cfg: ReproduceConfig) -> dict[str, Any]:
    """Run every seed and write the row; returns it."""
    dataset, data, generated_by = prepare(cfg)
    groups = seed_groups(list(cfg.seeds), cfg.vmap_seeds, len(cfg.gpu_slots))
    runs = [run for group_runs in train_groups(cfg, dataset, data, groups) for run in group_runs]
    row = summarize(cfg, dataset, data, generated_by, runs)
    json_path = write_row(cfg, dataset, row)
    logger.info("%s %s: success %.1f%% over %d seed(s); row in %s", dataset, cfg.agent, row["success_mean"],
                len(runs), json_path)
    return row


def run(cfg: ReproduceConfig, command: str) -> int:
    """`mqe-ogbench train`: the row; the exit code (2 for bad input or a failed run)."""
    setup_logging()
    try:
        reproduce(cfg)
    except (ReproduceError, generate.GenerateError) as e:
        print(f"mqe-ogbench train: error: {e}", file=sys.stderr)
        return 2
    return 0
