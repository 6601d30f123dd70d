"""`mqe-ogbench data`: generate an OGBench state-based dataset locally, with OGBench's own settings.

    mqe-ogbench data pointmaze-giant-stitch-v0 --out-dir data/ogbench --workers 2
    mqe-ogbench data cube-single-play-v0 --episodes 2 --length 60     # a tiny file for a smoke test

Writes `<name>.npz` (training episodes), `<name>-val.npz` (a tenth as many validation episodes),
both loadable by `ogbench.make_env_and_datasets(name, dataset_path=...)` and `mqe-train --data`,
and `<name>.json` (seed, settings, MuJoCo version). Each episode has its own seed derived from
`--seed` and its index, so the bytes do not depend on `--workers`. Bad input: one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import multiprocessing
import os
import sys
import time
import zipfile
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import tyro

from mqe_model.cli_logging import quiet_simulator_warnings, setup_logging
from mqe_model.ogbench import manip_data, maze_data

logger = logging.getLogger(__name__)

MAZE_SIZES = ("medium", "large", "giant", "teleport")
# Training episodes of the play and noisy datasets (OGBench's data_gen_scripts/commands.sh); 1001 steps each.
MANIPULATION_EPISODES = {"cube-single": 1000, "cube-double": 1000, "cube-triple": 3000, "cube-quadruple": 5000,
                         "scene": 1000, "puzzle-3x3": 1000, "puzzle-4x4": 1000, "puzzle-4x5": 3000, "puzzle-4x6": 5000}
# Families OGBench publishes that cannot be generated here, and why.
UNSUPPORTED = {
    "visual": "pixel datasets render every frame (~110 ms a frame on this machine's software renderer): too slow here",
    "antmaze": "locomotion mazes need OGBench's downloaded expert locomotion policies, which cannot be fetched here",
    "humanoidmaze": "locomotion mazes need OGBench's downloaded expert locomotion policies, which cannot be fetched here",
    "antsoccer": "antsoccer needs OGBench's downloaded expert policies, which cannot be fetched here",
    "powderworld": "powderworld is not a MuJoCo task and is outside this reproduction",
}


class GenerateError(ValueError):
    """The dataset cannot be generated as asked; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """What one OGBench dataset name means: environment, collector and official sizes."""

    name: str  # dataset name with its version, e.g. pointmaze-giant-stitch-v0
    env_id: str  # environment id the data is collected in, e.g. pointmaze-giant-v0
    family: str  # "maze" or "manipulation"
    dataset_type: str  # navigate, stitch or play
    episodes: int  # training episodes in the official file
    length: int  # steps per episode in the official file

    @property
    def val_episodes(self) -> int:
        """Validation episodes: a tenth of the training ones (100 for play), at least one."""
        return max(1, self.episodes // 10)


def versioned_name(name: str) -> str:
    """An OGBench dataset name with its `-v0` suffix, whether or not it was given."""
    return name if name.endswith("-v0") else f"{name}-v0"


def dataset_spec(name: str, episodes: int | None = None, length: int | None = None) -> DatasetSpec:
    """Parse an OGBench dataset name (with or without `-v0`) into its spec; raises GenerateError."""
    full = versioned_name(name)
    base = full[: -len("-v0")]
    family_word = base.split("-")[0]
    if family_word in UNSUPPORTED:
        raise GenerateError(f"{full}: not supported: {UNSUPPORTED[family_word]}")
    dataset_type = base.rsplit("-", 1)[-1]
    env_base = base.rsplit("-", 1)[0]
    maze_size = env_base.split("-", 1)[-1]
    if family_word == "pointmaze" and dataset_type in ("navigate", "stitch") and maze_size in MAZE_SIZES:
        family = "maze"
        if dataset_type == "stitch":
            sizes = (5000, 201)
        else:
            sizes = (500, 2001) if "giant" in env_base else (1000, 1001)
    elif env_base in MANIPULATION_EPISODES and dataset_type in ("play", "noisy"):
        family, sizes = "manipulation", (MANIPULATION_EPISODES[env_base], 1001)
    else:
        known = [f"pointmaze-{s}-{t}-v0" for s in MAZE_SIZES for t in ("navigate", "stitch")]
        known += [f"{e}-{t}-v0" for e in MANIPULATION_EPISODES for t in ("play", "noisy")]
        raise GenerateError(f"{full}: unknown dataset; supported: {', '.join(known)}")
    out_episodes = sizes[0] if episodes is None else episodes
    out_length = sizes[1] if length is None else length
    if out_episodes < 1 or out_length < 2:
        raise GenerateError(f"--episodes {out_episodes} --length {out_length}: need at least 1 episode of 2 steps")
    return DatasetSpec(full, f"{env_base}-v0", family, dataset_type, out_episodes, out_length)


@dataclasses.dataclass(frozen=True)
class GenerateConfig:
    """Generate one OGBench dataset (training and validation files) with OGBench's settings."""

    # OGBench dataset name, e.g. pointmaze-giant-stitch-v0
    dataset: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="DATASET")]
    out_dir: Path = Path("data/ogbench")  # where <name>.npz, <name>-val.npz and <name>.json go
    seed: int = 0  # master seed; episode i uses a seed derived from (seed, i)
    episodes: int | None = None  # training episodes; None: the official count (validation: a tenth)
    length: int | None = None  # steps per episode; None: the official length
    workers: int = 2  # processes collecting episodes in parallel
    overwrite: bool = False  # replace existing files of this dataset
    progress: bool = True  # show a progress bar

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise GenerateError(f"--workers {self.workers}: must be >= 1")


def output_paths(out_dir: Path, name: str) -> dict[str, Path]:
    """The training, validation and settings files of a dataset."""
    return {"train": out_dir / f"{name}.npz", "val": out_dir / f"{name}-val.npz", "settings": out_dir / f"{name}.json"}


def episode_seed(seed: int, index: int) -> int:
    """The seed of episode `index`: independent streams per episode, the same for any worker count."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


_collector: Any = None  # the worker process's environment and oracles, built once


def _init_worker(spec: DatasetSpec) -> None:
    global _collector
    quiet_simulator_warnings()
    if spec.family == "maze":
        _collector = maze_data.MazeCollector(spec.env_id, spec.dataset_type, spec.length)
    else:
        _collector = manip_data.ManipulationCollector(spec.env_id, spec.dataset_type, spec.length)


def _collect(seed: int) -> dict[str, Any]:
    return _collector.collect(seed)


def collect_episodes(spec: DatasetSpec, seed: int, workers: int, progress: bool) -> list[dict[str, Any]]:
    """All training then validation episodes, in index order."""
    from tqdm import tqdm

    seeds = [episode_seed(seed, i) for i in range(spec.episodes + spec.val_episodes)]
    workers = min(workers, len(seeds))
    episodes: list[dict[str, Any]] = []
    with tqdm(total=len(seeds) * spec.length, unit="step", unit_scale=True, disable=not progress,
              desc=spec.name, dynamic_ncols=True) as bar:
        if workers == 1:
            _init_worker(spec)
            for result in map(_collect, seeds):
                episodes.append(result)
                bar.update(len(result["arrays"]["terminals"]))
            return episodes
        # spawn: a fresh interpreter per worker, no MuJoCo or GL state inherited from the parent;
        # the context manager terminates the workers if collection fails or is interrupted.
        with multiprocessing.get_context("spawn").Pool(workers, _init_worker, (spec,)) as pool:
            for result in pool.imap(_collect, seeds):
                episodes.append(result)
                bar.update(len(result["arrays"]["terminals"]))
    return episodes


def save_npz_atomic(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write a compressed .npz with fixed zip timestamps (same data, same bytes), then rename it into place."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for key, array in arrays.items():
                info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                with archive.open(info, "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def concatenate(episodes: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Episodes back to back, one array per key."""
    return {k: np.concatenate([e["arrays"][k] for e in episodes]) for k in episodes[0]["arrays"]}


def settings_record(cfg: GenerateConfig, spec: DatasetSpec, episodes: list[dict[str, Any]],
                    seconds: float) -> dict[str, Any]:
    """Everything needed to regenerate the data and judge it against the official files."""
    import importlib.metadata

    import mujoco

    if spec.family == "maze":
        goals = ("junction cells" if spec.dataset_type == "navigate"
                 else f"{maze_data.STITCH_GOAL_STEPS} BFS steps from the start")
        policy = {"oracle": "get_oracle_subgoal unit direction", "action_noise_std": maze_data.ACTION_NOISE_STD,
                  "goal_cells": goals}
    elif spec.dataset_type == "play":
        policy = {"oracle": "plan", "noise": manip_data.PLAN_NOISE, "noise_smoothing": manip_data.PLAN_NOISE_SMOOTHING,
                  "segment_dt": manip_data.SEGMENT_DT,
                  "p_stack": "0 single, U(0, 0.25) double, U(0.05, 0.35) triple, U(0.1, 0.5) quadruple, 0.5 otherwise"}
    else:
        policy = {"oracle": "markov", "min_norm": manip_data.MARKOV_MIN_NORM,
                  "action_noise": f"N(0, xi * {manip_data.MARKOV_NOISE_SCALE.tolist()}), "
                                  f"xi ~ U(0, {manip_data.MARKOV_MAX_NOISE}) per episode",
                  "p_random_action": manip_data.random_action_probability(spec.env_id, spec.dataset_type),
                  "p_stack": "0 single, U(0, 0.25) double, U(0.05, 0.35) triple, U(0.1, 0.5) quadruple, 0.5 otherwise"}
    transitions = sum(len(e["arrays"]["terminals"]) for e in episodes)
    workers = min(cfg.workers, len(episodes))  # collect_episodes never starts more than one per episode
    return {
        "dataset": spec.name, "env_id": spec.env_id, "family": spec.family, "dataset_type": spec.dataset_type,
        "seed": cfg.seed, "episode_seeds": "numpy SeedSequence([seed, episode index])",
        "episodes": spec.episodes, "val_episodes": spec.val_episodes, "length": spec.length,
        "official_size": cfg.episodes is None and cfg.length is None, "policy": policy,
        "scene_retries": sum(e["retries"] for e in episodes),
        "mujoco_version": mujoco.__version__, "ogbench_version": importlib.metadata.version("ogbench"),
        # Manipulation contact dynamics differ between MuJoCo 3.2 (the official files) and later versions.
        "mujoco_note": "pointmaze is identical across MuJoCo versions; manipulation contacts differ "
                       "from the official (MuJoCo 3.2-era) files",
        "workers": workers, "seconds": round(seconds, 1),
        "transitions_per_s_per_worker": round(transitions / seconds / workers, 1),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def generate(cfg: GenerateConfig) -> dict[str, Path]:
    """Collect, then write the validation file, the training file and last the settings file."""
    spec = dataset_spec(cfg.dataset, cfg.episodes, cfg.length)
    paths = output_paths(cfg.out_dir, spec.name)
    existing = [str(p) for p in paths.values() if p.exists()]
    if existing and not cfg.overwrite:
        raise GenerateError(f"{existing[0]}: already exists; pass --overwrite to replace it "
                            "or choose another --out-dir")
    logger.info("generating %s: %d + %d episodes x %d steps in %s, %d worker(s)", spec.name, spec.episodes,
                spec.val_episodes, spec.length, spec.env_id, cfg.workers)
    start = time.perf_counter()
    episodes = collect_episodes(spec, cfg.seed, cfg.workers, cfg.progress)
    seconds = time.perf_counter() - start
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    save_npz_atomic(paths["val"], concatenate(episodes[spec.episodes:]))
    save_npz_atomic(paths["train"], concatenate(episodes[: spec.episodes]))
    record = settings_record(cfg, spec, episodes, seconds)
    tmp = paths["settings"].with_name(f".{paths['settings'].name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, paths["settings"])
    logger.info("wrote %s (%.0f transitions/s per worker)", paths["train"], record["transitions_per_s_per_worker"])
    return paths


def run(cfg: GenerateConfig, command: str) -> int:
    """`mqe-ogbench data`: generate the dataset; the exit code (2 for bad input)."""
    setup_logging()
    try:
        generate(cfg)
    except GenerateError as e:
        print(f"mqe-ogbench data: error: {e}", file=sys.stderr)
        return 2
    return 0
