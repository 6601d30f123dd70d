"""`mqe-train` (also `python -m mqe_model.train`): train MQE, GCBC or GCIQL from a dataset to checkpoints.

    mqe-train --agent mqe --preset tiny --data data/sim --workdir runs/tiny --steps 2000
    mqe-train ... --resume            # continue the run in --workdir exactly where it stopped
    mqe-train ... --set alpha=0.03    # override fields of the agent preset

Everything is checked before anything is written: bad input ends with one line naming the file
and the problem, and exit code 2.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Literal

import jax
import numpy as np
import tyro

from mqe_model import checkpoints
from mqe_model.agents import registry
from mqe_model.agents.configs import apply_overrides, config_from_json, config_to_json
from mqe_model.batches import BatchStream, plan_chunks
from mqe_model.checkpoints import CheckpointError
from mqe_model.cli_logging import setup_logging
from mqe_model.data.augment import AUGMENTATIONS, DEFAULT_PROB, augment_batch
from mqe_model.data.dataset import Dataset, DatasetError
from mqe_model.data.device_images import fits_on_device, gather_images, index_dataset
from mqe_model.data.prepare import PreparedData, prepare
from mqe_model.evaluation import EvaluationUnavailable, make_env
from mqe_model.metrics import (
    METRICS_FILE,
    TRAINED_FILE,
    MetricsWriter,
    read_evaluations,
    truncate_after,
)
from mqe_model.parallel import DataParallel, maybe_initialize_distributed

logger = logging.getLogger(__name__)

RUN_FILES = ("checkpoints", METRICS_FILE, TRAINED_FILE, "tensorboard")  # what --overwrite removes, nothing else
# Batch fields that hold observations (images are augmented in all of them with one transform).
IMAGE_KEYS = ("observations", "next_observations", "goals", "waypoints", "actor_goals", "value_goals")


class RunError(ValueError):
    """The command line or the workdir does not allow this run; the message says how to fix it."""


class EvaluationIncomplete(RuntimeError):
    """The run trained to its last step but its final evaluation did not complete (exit code 1)."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """One training run. Agent hyperparameters come from `--agent` + `--preset`, then `--set`."""

    data: Path  # dataset: OGBench .npz, canonical directory (docs/dataset_format.md), RLDS directory or LeRobotDataset
    workdir: Path  # run directory: checkpoints/, metrics.jsonl
    agent: Literal["mqe", "gcbc", "gciql"] = "mqe"  # algorithm
    preset: str = "ogbench_state"  # agent preset: ogbench_state, ogbench_pixel, bridge, sim, tiny
    set: tuple[str, ...] = ()  # agent config overrides, key=value (e.g. --set alpha=0.03 batch_size=128)
    steps: int = 1_000_000  # total updates of the run (a resumed run continues up to this)
    seed: int = 0  # seed of initialization, batches and augmentation
    resume: bool = False  # continue the run in --workdir from its latest checkpoint
    overwrite: bool = False  # delete the run in --workdir (checkpoints, metrics) and start afresh
    num_seeds: int = 1  # independent seeds trained at once with jax.vmap (small models)
    updates_per_dispatch: int = 20  # updates per jitted call (lax.scan), fewer host round trips
    log_every: int = 1000  # updates between metric lines in metrics.jsonl
    save_every: int = 50_000  # updates between checkpoints (one is always written at the end)
    keep: int = 3  # checkpoints kept (oldest deleted)
    image_size: int | None = None  # px, square size images are resized to; None keeps the data's size
    augment: Literal["auto", "none", "shift", "bridge"] = "auto"  # auto: shift (impala), bridge (resnet), none (states)
    augment_prob: float | None = None  # per-sample probability; None: 0.5 for shift, 1.0 for bridge
    action_dim: int | None = None  # expected action dimension; None accepts the data's
    bridge_actions: Literal["reached", "commanded"] = "reached"  # BridgeData V2 (RLDS) only: relabel to the reached state's deltas (official loader, Octo; action_frame "measured") or keep the commands ("previous_target")
    action_normalization: Literal["auto", "bounds_q99", "minmax"] = "auto"  # auto: bounds_q99 (1st-99th percentiles) for RLDS and LeRobot data, minmax otherwise
    camera: str | None = None  # LeRobot data only: the image or video feature trained on; None: the first in meta/info.json
    data_cache: Path | None = None  # where RLDS and LeRobot data are decoded to memory-mapped files; None: $MQE_DATA_CACHE or ~/.cache/mqe-deploy/data
    devices: int | None = None  # use the first N local devices; None: all
    data_workers: int = 2  # threads sampling batches
    prefetch: int = 2  # dispatches of batches prepared ahead on the device
    async_checkpoints: bool = True  # save in the background while training continues
    eval_env: str | None = None  # OGBench environment to evaluate on (needs `ogbench`), e.g. cube-single-play-v0
    eval_every: int = 100_000  # updates between evaluations
    eval_start: int = 0  # updates before which no evaluation runs (the last step is always evaluated)
    eval_episodes: int = 10  # episodes per task (5 tasks)
    eval_workers: int = 2  # evaluation processes
    tensorboard: bool = False  # also write TensorBoard events to <workdir>/tensorboard (needs tensorboardX)
    wandb_project: str | None = None  # also log to this W&B project (needs wandb)
    progress: bool = True  # show a progress bar

    def __post_init__(self) -> None:
        positive = ("steps", "num_seeds", "updates_per_dispatch", "log_every", "keep", "prefetch")
        bad = [f"--{k.replace('_', '-')} {getattr(self, k)}" for k in positive if getattr(self, k) < 1]
        if bad:
            raise RunError(f"{', '.join(bad)}: must be >= 1")
        if self.resume and self.overwrite:
            raise RunError("--resume and --overwrite contradict each other; pass one")
        if not 0 <= self.eval_start <= self.steps:
            raise RunError(f"--eval-start {self.eval_start}: must be within [0, --steps {self.steps}]")
        if self.augment_prob is not None and not 0 <= self.augment_prob <= 1:
            raise RunError(f"--augment-prob {self.augment_prob}: must be within [0, 1]")


@dataclasses.dataclass
class RunSetup:
    """What `prepare_run` checked and built; nothing is written until `train` uses it."""

    agent_config: Any
    data: PreparedData
    resume_step: int | None  # latest checkpoint step when resuming an existing run
    existing: bool  # the workdir holds a run


def resolve_agent_config(cfg: TrainConfig) -> Any:
    """The agent config from `--agent`, `--preset` and `--set`."""
    module = registry.get(cfg.agent)
    try:
        return apply_overrides(module.get_config(cfg.preset), cfg.set)
    except (ValueError, TypeError) as e:
        raise RunError(str(e)) from None


def prepare_run(cfg: TrainConfig) -> RunSetup:
    """Check the command line, the workdir and the data; build the agent config. Writes nothing."""
    agent_config = resolve_agent_config(cfg)
    for wanted, module in ((cfg.tensorboard, "tensorboardX"), (cfg.wandb_project, "wandb")):
        if wanted and importlib.util.find_spec(module) is None:
            raise RunError(f"logging to {module} was asked for but it is not installed: pip install {module}")
    if cfg.eval_env:
        make_env(cfg.eval_env)  # one line now, not a failure after the first checkpoint
    ckpt_root = cfg.workdir / "checkpoints"
    steps = checkpoints.step_dirs(ckpt_root)
    existing = bool(steps) or any((cfg.workdir / f).exists() for f in RUN_FILES)
    if existing and not (cfg.resume or cfg.overwrite):
        raise RunError(f"{cfg.workdir}: already holds a run; pass --resume to continue it or "
                       "--overwrite to replace it, or choose another --workdir")
    expected_dim, metadata, resume_step = cfg.action_dim, None, None
    if cfg.resume and steps:
        resume_step = max(steps)
        metadata = checkpoints.read_metadata(steps[resume_step])
        where = steps[resume_step] / checkpoints.METADATA_FILE
        if metadata["agent"] != cfg.agent:
            raise CheckpointError(f"{where}: the run in {cfg.workdir} trains {metadata['agent']!r}, "
                                  f"not --agent {cfg.agent}; pass --agent {metadata['agent']}")
        wanted = config_to_json(agent_config)
        try:  # fields newer than the run take their defaults, which reproduce what the older code did
            saved = config_to_json(config_from_json(cfg.agent, metadata["config"]))
        except (ValueError, TypeError) as e:
            raise CheckpointError(f"{where}: {e}; this run was written by a newer mqe_model") from None
        diff = sorted(k for k in wanted if saved[k] != wanted[k])
        if diff:
            raise CheckpointError(f"{where}: the run was trained with other settings for {diff}; "
                                  "resume with the same --preset and --set")
        if int(metadata.get("num_seeds", 1)) != cfg.num_seeds:
            raise CheckpointError(f"{where}: the run trains {metadata.get('num_seeds', 1)} seed(s), "
                                  f"not --num-seeds {cfg.num_seeds}")
        expected_dim = len(metadata["action_stats"]["mean"])
    elif cfg.resume:
        logger.warning("--resume: no checkpoint in %s yet; starting a new run", ckpt_root)
    data = prepare(cfg.data, cfg.image_size, expected_dim, cfg.bridge_actions, cfg.action_normalization,
                   cfg.data_cache, cfg.camera)
    if metadata is not None:
        where = steps[resume_step] / checkpoints.METADATA_FILE
        if metadata["dataset"]["fingerprint"] != data.info["fingerprint"]:
            raise CheckpointError(f"{where}: the run was trained on other data "
                                  f"({metadata['dataset']['path']}) than {cfg.data}")
        if metadata["image"] != data.image:
            raise CheckpointError(f"{where}: the run's images are {metadata['image']}, "
                                  f"now {data.image}; pass the same --image-size")
    is_image = data.dataset.observations.ndim == 4
    if is_image != (getattr(agent_config, "encoder", None) is not None):
        kind = "images" if is_image else "state vectors"
        raise RunError(f"{cfg.data}: observations are {kind} but preset {cfg.preset!r} expects "
                       f"{'state vectors' if is_image else 'images'} (encoder "
                       f"{getattr(agent_config, 'encoder', None)}); choose a matching --preset")
    return RunSetup(agent_config, data, resume_step, existing)


def augmentation(cfg: TrainConfig, agent_config: Any) -> tuple[str, float]:
    """The augmentation kind and per-sample probability for this run."""
    kind = cfg.augment
    if kind == "auto":
        encoder = getattr(agent_config, "encoder", None) or ""
        kind = "shift" if encoder.startswith("impala") else "bridge" if encoder.startswith("resnet") else "none"
    assert kind in AUGMENTATIONS
    return kind, DEFAULT_PROB[kind] if cfg.augment_prob is None else cfg.augment_prob


def make_train_step(kind: str, prob: float, num_seeds: int, mesh: Any = None):
    """Jitted (agent, batches, aug_key, images) -> (agent, last metrics): a scan over the leading axis,
    each batch augmented on the device with a key drawn from (aug_key, agent step). With `images` (the
    dataset's frames on the device, `place_images`), the batches' image fields are row indices into
    them, gathered here. With the data-parallel `mesh`, it is traced and run inside it (see
    `parallel.replicated_in_mesh`)."""

    def one_update(agent: Any, batch: dict, aug_key: jax.Array, images: jax.Array | None) -> tuple[Any, dict]:
        if images is not None:
            batch = gather_images(batch, images, IMAGE_KEYS)
        key = jax.random.fold_in(aug_key, agent.step)
        batch = augment_batch(key, batch, IMAGE_KEYS, kind, prob)
        return agent._update(batch)

    update = jax.vmap(one_update, in_axes=(0, 0, 0, None)) if num_seeds > 1 else one_update

    def train_step(agent: Any, batches: dict, aug_key: jax.Array, images: jax.Array | None = None
                   ) -> tuple[Any, dict]:
        agent, infos = jax.lax.scan(lambda a, b: update(a, b, aug_key, images), agent, batches)
        return agent, jax.tree_util.tree_map(lambda x: x[-1], infos)

    jitted = jax.jit(train_step, donate_argnums=0)
    if mesh is None:
        return jitted

    def train_step_in_mesh(agent: Any, batches: dict, aug_key: jax.Array, images: jax.Array | None = None
                           ) -> tuple[Any, dict]:
        with jax.set_mesh(mesh):
            return jitted(agent, batches, aug_key, images)

    return train_step_in_mesh


def place_images(dataset: Dataset, parallel: DataParallel) -> tuple[Dataset, jax.Array | None]:
    """(the dataset to sample from, its frames on every device or None). Image datasets that fit
    (`device_images.fits_on_device`) are uploaded once and sampled as row indices; others, and state
    datasets, are sampled whole on the host."""
    frames = dataset.observations
    if frames.ndim != 4 or not fits_on_device(frames.nbytes, jax.local_devices()[0]):
        return dataset, None
    return index_dataset(dataset), parallel.replicate(frames)


def make_batch_sampler(agent: str, dataset: Dataset, agent_config: Any, parallel: DataParallel
                       ) -> tuple[Any, jax.Array | None, dict[str, np.ndarray]]:
    """(the agent's sampler, the frames on the device or None, an example batch of real observations
    for the agent's shapes)."""
    sampled, images = place_images(dataset, parallel)
    sampler = registry.get(agent).make_sampler(sampled, agent_config)
    example = sampler.sample(np.random.default_rng(0), 2)
    if images is not None:
        example = gather_images(example, dataset.observations, IMAGE_KEYS)
    return sampler, images, example


def crosses(start: int, end: int, every: int) -> bool:
    """Whether updates (start, end] pass a multiple of `every`."""
    return every > 0 and end // every > start // every


def create_agent(cfg: TrainConfig, setup: RunSetup, example: dict[str, np.ndarray]) -> Any:
    """A fresh agent (or `num_seeds` of them stacked on a leading axis)."""
    agent_class = registry.get(cfg.agent).Agent
    agents = [agent_class.create(cfg.seed + i, example, setup.agent_config) for i in range(cfg.num_seeds)]
    if cfg.num_seeds == 1:
        return agents[0]
    return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *agents)


def evaluates_at(cfg: TrainConfig, chunk_start: int, chunk_end: int) -> bool:
    """Whether the loop evaluates after the dispatch of updates (chunk_start, chunk_end]: the last
    one, and from --eval-start on each that passes a multiple of --eval-every."""
    return chunk_end == cfg.steps or (chunk_end >= cfg.eval_start and crosses(chunk_start, chunk_end, cfg.eval_every))


def missing_evaluation_steps(cfg: TrainConfig, saved: list[int], evaluated: set[int], start: int) -> list[int]:
    """Saved steps up to `start` that the loop evaluated at but metrics.jsonl does not hold: their
    evaluation was lost with the process (killed while evaluations queued behind the training, a
    broken worker pool). Chunks end at every checkpoint step, so those from step 0 are the ones any
    earlier (resumed) part of the run dispatched."""
    scheduled = {end for begin, end in plan_chunks(0, start, cfg.updates_per_dispatch, (cfg.save_every,))
                 if evaluates_at(cfg, begin, end)}
    return sorted(step for step in saved if step in scheduled and step not in evaluated)


def submit_missing_evaluations(cfg: TrainConfig, evaluator: Any, start: int, params: Any,
                               start_metadata: dict[str, Any]) -> None:
    """On resume, evaluate from their checkpoints the scheduled evaluations that never reached
    metrics.jsonl, oldest first, so they are written before the evaluations of the steps to come."""
    saved = checkpoints.step_dirs(cfg.workdir / "checkpoints")
    evaluated = {row["step"] for row in read_evaluations(cfg.workdir)}
    for step in missing_evaluation_steps(cfg, list(saved), evaluated, start):
        logger.info("the run's evaluation at step %d is missing; evaluating its checkpoint", step)
        if step == start:
            evaluator.submit(step, cfg.agent, start_metadata, params)
        else:
            evaluator.submit(step, cfg.agent, checkpoints.read_metadata(saved[step]),
                             checkpoints.restore_params(saved[step]))


def train(cfg: TrainConfig, setup: RunSetup) -> Any:
    """Run the training loop; returns the final agent."""
    parallel = DataParallel(cfg.devices)
    batch_size = setup.agent_config.batch_size
    try:
        parallel.check_batch_size(batch_size)
    except ValueError as e:
        raise RunError(str(e)) from None
    sampler, images, example = make_batch_sampler(cfg.agent, setup.data.dataset, setup.agent_config, parallel)
    agent = parallel.replicate(create_agent(cfg, setup, example))
    primary = jax.process_index() == 0

    if cfg.overwrite and setup.existing and primary:
        for name in RUN_FILES:
            path = cfg.workdir / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    cfg.workdir.mkdir(parents=True, exist_ok=True)
    manager = checkpoints.make_manager(cfg.workdir / "checkpoints", cfg.keep, cfg.async_checkpoints)
    start = 0
    if setup.resume_step is not None:
        agent = checkpoints.restore_agent(manager, setup.resume_step, agent)
        start = setup.resume_step
        if primary:
            truncate_after(cfg.workdir / METRICS_FILE, start)
        logger.info("resumed %s at step %d", cfg.workdir, start)
        if start >= cfg.steps:
            logger.info("the run is already at step %d >= --steps %d: nothing to do", start, cfg.steps)

    data = setup.data
    metadata = lambda step: checkpoints.build_metadata(  # noqa: E731
        agent=cfg.agent, config=config_to_json(setup.agent_config), step=step,
        action_stats=data.action_stats.to_json(), image=data.image, observation=data.observation,
        dataset=data.info, num_seeds=cfg.num_seeds, action_frame=data.action_frame,
        train={k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(cfg).items()})
    kind, prob = augmentation(cfg, setup.agent_config)
    train_step = make_train_step(kind, prob, cfg.num_seeds, parallel.mesh)
    base_key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 0x617567)  # augmentation stream
    aug_key = (jax.random.split(base_key, cfg.num_seeds) if cfg.num_seeds > 1 else base_key)
    aug_key = parallel.replicate(aug_key)

    writer = MetricsWriter(cfg.workdir, cfg.tensorboard, cfg.wandb_project,
                           metadata(start)["train"], enabled=primary)
    evaluator = None
    if cfg.eval_env:
        from mqe_model.evaluation import OGBenchEvaluator

        evaluator = OGBenchEvaluator(cfg.eval_env, cfg.eval_episodes, cfg.eval_workers, cfg.seed)
        if setup.resume_step is not None:
            submit_missing_evaluations(cfg, evaluator, start, agent.params, metadata(start))
    stream = BatchStream(sampler, batch_size, cfg.seed, cfg.num_seeds, parallel,
                         cfg.data_workers, cfg.prefetch)
    chunks = plan_chunks(start, cfg.steps, cfg.updates_per_dispatch, (cfg.save_every,))
    logger.info("training %s (%s) on %d device(s): steps %d..%d, augmentation %s (p=%.2f), frames %s",
                cfg.agent, cfg.preset, parallel.num_devices, start, cfg.steps, kind, prob,
                "on the device" if images is not None else "sampled on the host")
    from tqdm import tqdm

    bar = tqdm(total=cfg.steps, initial=start, unit="step", disable=not (cfg.progress and primary),
               dynamic_ncols=True, smoothing=0.1)
    last_time, last_step = time.perf_counter(), start
    try:
        for chunk_start, chunk_end, batches in stream(chunks):
            agent, info = train_step(agent, batches, aug_key, images)
            bar.update(chunk_end - chunk_start)
            last = chunk_end == cfg.steps
            if last or crosses(chunk_start, chunk_end, cfg.log_every):
                values = {k: float(np.mean(v)) for k, v in jax.device_get(info).items()}
                now = time.perf_counter()
                values["perf/steps_per_s"] = (chunk_end - last_step) / (now - last_time)
                last_time, last_step = now, chunk_end
                writer.write(chunk_end, values)
                bar.set_postfix(loss=f"{values.get('actor/loss', float('nan')):.3g}")
            if last or crosses(chunk_start, chunk_end, cfg.save_every):
                checkpoints.save(manager, chunk_end, agent, metadata(chunk_end))
            if evaluator is not None:
                if evaluates_at(cfg, chunk_start, chunk_end):
                    evaluator.submit(chunk_end, cfg.agent, metadata(chunk_end), agent.params)
                for step, result in evaluator.poll():
                    writer.write(step, result)
        manager.wait_until_finished()
        if primary:
            (cfg.workdir / TRAINED_FILE).write_text(json.dumps({"step": max(start, cfg.steps)}) + "\n")
        if evaluator is not None:
            for step, result in evaluator.finish():
                writer.write(step, result)
            if evaluator.failed:
                logger.warning("evaluations lost to a broken worker pool, at steps %s",
                               ", ".join(map(str, evaluator.failed)))
            if cfg.steps in evaluator.failed:
                raise EvaluationIncomplete(
                    f"{cfg.workdir}: trained and saved to step {cfg.steps}, but its evaluation failed (the "
                    "log above says why); run the same command with --resume to evaluate the last checkpoint")
    finally:
        bar.close()
        writer.close()
        manager.close()
    return agent


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (2 for bad input, 1 for a missing final evaluation)."""
    setup_logging()
    try:
        cfg = tyro.cli(TrainConfig, args=argv)
        try:
            maybe_initialize_distributed()
        except ValueError as e:
            raise RunError(str(e)) from None
        setup = prepare_run(cfg)
        train(cfg, setup)
    except (RunError, DatasetError, CheckpointError, EvaluationUnavailable) as e:
        print(f"mqe-train: error: {e}", file=sys.stderr)
        return 2
    except EvaluationIncomplete as e:
        print(f"mqe-train: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
