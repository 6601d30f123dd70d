"""Steps/s of the full `mqe-train` loop (data sampling, prefetch, augmentation included) against the
bare jitted update on device-resident batches, and the data-parallel scaling over devices.

For each device count N > 1 it also times the bare update on one device at the batch one of N devices
gets (batch / N): N devices cannot beat that rate, communication or not, so its ratio to the full
batch's rate is the ceiling of N-device scaling for this preset, and the measured scaling over that
ceiling is what communication and synchronisation cost.

    python benchmarks/train_throughput.py --preset tiny                       # CPU smoke run
    python benchmarks/train_throughput.py --preset ogbench_state              # one GPU
    python benchmarks/train_throughput.py --preset bridge --devices 1 2       # ResNet-34 x2, 128px, 2 GPUs
    python benchmarks/train_throughput.py --preset sim --image-size 64 --baseline encoder=impala_small  # bf16 vs float32

Data is synthetic with the shapes of the real thing (scene-play: 40-d states, 5-d actions; Bridge:
128 x 128 RGB, 7-d actions), written once to a temporary directory and read by the real loader.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
import tyro

from benchmarks.kernels import kernel_profile
from mqe_model import train
from mqe_model.batches import BatchStream
from mqe_model.parallel import DataParallel


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """What to measure."""

    preset: str = "tiny"  # agent preset: tiny (CPU), ogbench_state, bridge, sim, ogbench_pixel
    agent: str = "mqe"  # mqe, gcbc or gciql
    devices: tuple[int, ...] = (1,)  # device counts to measure the loop on (scaling)
    steps: int = 400  # updates per loop measurement (after warm-up)
    updates_per_dispatch: int = 20  # updates per jitted call
    data_workers: int = 4  # sampling threads of the loop
    episodes: int = 100  # synthetic trajectories
    length: int = 50  # steps per trajectory
    image_size: int | None = None  # px, images resized to this for training (the demo: 64); None keeps 128
    bare_only: bool = False  # measure only the bare update (no loop)
    baseline: tuple[str, ...] = ()  # agent overrides (key=value) of a baseline bare update to compare with, e.g. encoder=impala_small
    profile: int = 0  # also list the N kernels that take the most device time in the bare update (GPU)
    json: Path | None = None  # also write the figures (steps/s, scaling ratios) here


def write_data(root: Path, cfg: BenchConfig, images: bool) -> Path:
    """Synthetic data in the canonical layout with the real shapes."""
    rng = np.random.default_rng(0)
    n = cfg.episodes * cfg.length
    terminals = np.zeros(n, bool)
    terminals[cfg.length - 1 :: cfg.length] = True
    if images:
        observations = rng.integers(0, 256, size=(n, 128, 128, 3), dtype=np.uint8)
        action_dim, shape = 7, [128, 128, 3]
    else:
        observations = rng.normal(size=(n, 40)).astype(np.float32)
        action_dim, shape = 5, [40]
    actions = rng.uniform(-1, 1, size=(n, action_dim)).astype(np.float32)
    root.mkdir(parents=True, exist_ok=True)
    np.savez(root / "shard-00000.npz", observations=observations, actions=actions, terminals=terminals)
    (root / "dataset.json").write_text(json.dumps({"format": "mqe-canonical", "version": 1,
                                                   "observation": {"shape": shape}, "action_dim": action_dim}))
    return root


def loop_rate(cfg: BenchConfig, data: Path, workdir: Path, devices: int) -> float:
    """Median steps/s of the training loop between metric lines, warm-up excluded."""
    log_every = cfg.updates_per_dispatch * 5
    run = train.TrainConfig(
        data=data, workdir=workdir, agent=cfg.agent, preset=cfg.preset, overwrite=True,
        steps=cfg.steps + 2 * log_every, updates_per_dispatch=cfg.updates_per_dispatch,
        log_every=log_every, save_every=0, devices=devices, data_workers=cfg.data_workers,
        progress=False, image_size=cfg.image_size)
    train.train(run, train.prepare_run(run))
    lines = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    return float(np.median([x["perf/steps_per_s"] for x in lines[2:]]))


def bare_rate(cfg: BenchConfig, data: Path, devices: int = 1, iters: int = 10,
              batch_divisor: int = 1, overrides: tuple[str, ...] = ()) -> float:
    """Steps/s of the jitted update alone on `devices` devices (batch sharded as in the loop,
    parameters replicated), batches already there: the loop's ceiling, without the host's data.
    `batch_divisor` N trains on the preset's batch / N (one of N devices' share); `overrides` change
    the agent config (`--set`)."""
    run = train.TrainConfig(data=data, workdir=Path("unused"), agent=cfg.agent, preset=cfg.preset,
                            image_size=cfg.image_size, set=overrides)
    if batch_divisor > 1:
        batch = train.resolve_agent_config(run).batch_size // batch_divisor
        run = dataclasses.replace(run, set=(*overrides, f"batch_size={batch}"))
    setup = train.prepare_run(run)
    parallel = DataParallel(devices)
    sampler, images, example = train.make_batch_sampler(cfg.agent, setup.data.dataset, setup.agent_config, parallel)
    stream = BatchStream(sampler, setup.agent_config.batch_size, 0, 1, parallel)
    batches = next(iter(stream([(0, cfg.updates_per_dispatch)])))[2]
    agent = parallel.replicate(train.create_agent(run, setup, example))
    kind, prob = train.augmentation(run, setup.agent_config)
    step = train.make_train_step(kind, prob, 1, parallel.mesh)
    key = jax.random.PRNGKey(0)
    for _ in range(2):
        agent, info = step(agent, batches, key, images)
    jax.block_until_ready(agent)
    start = time.perf_counter()
    for _ in range(iters):
        agent, info = step(agent, batches, key, images)
    jax.block_until_ready(agent)
    rate = iters * cfg.updates_per_dispatch / (time.perf_counter() - start)
    if cfg.profile and not overrides and devices == 1 and batch_divisor == 1:
        state = [agent]

        def dispatch() -> None:
            state[0], info = step(state[0], batches, key, images)
            jax.block_until_ready(info)

        profile = kernel_profile(dispatch, 2)
        per = cfg.updates_per_dispatch  # the profile is per dispatch
        print(f"kernels: {profile.kernel_us / per:.0f} us per update, {profile.launches / per:.0f} launches")
        for name, us, count in profile.rows[: cfg.profile]:
            print(f"{us / per:9.1f} us {100 * us / profile.kernel_us:5.1f}%  x{count / per:4.1f}  {name[:100]}")
    return rate


def main(cfg: BenchConfig) -> None:
    """Print one table row per measurement."""
    images = cfg.preset in ("bridge", "ogbench_pixel", "sim")
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = write_data(Path(tmp) / "data", cfg, images)
        print(f"device: {jax.devices()[0].device_kind} x {jax.device_count()}; {cfg.agent} {cfg.preset}")
        bare = figures["bare update, 1 device: steps/s"] = bare_rate(cfg, data)
        print(f"bare update (1 device): {bare:.1f} steps/s")
        if cfg.baseline:
            base = figures["baseline bare update, 1 device: steps/s"] = bare_rate(cfg, data, overrides=cfg.baseline)
            figures["bare update: x vs baseline"] = bare / base
            print(f"baseline bare update ({' '.join(cfg.baseline)}): {base:.1f} steps/s; "
                  f"the preset's is x{bare / base:.2f}")
        for n in (n for n in cfg.devices if n > 1):
            bare_n = figures[f"bare update, {n} devices: steps/s"] = bare_rate(cfg, data, n)
            figures[f"bare update, {n} devices: x vs 1 device"] = bare_n / bare
            print(f"bare update ({n} devices): {bare_n:.1f} steps/s (x{bare_n / bare:.2f} vs 1 device)")
            share = figures[f"bare update, 1 device, batch / {n}: steps/s"] = bare_rate(cfg, data, batch_divisor=n)
            ceiling = figures[f"{n}-device ceiling: x vs 1 device"] = share / bare
            figures[f"bare update, {n} devices: share of the ceiling"] = bare_n / share
            print(f"bare update (1 device, batch / {n}): {share:.1f} steps/s: {n} devices can reach at most "
                  f"x{ceiling:.2f}; they reach {bare_n / share:.0%} of that")
        rates = {}
        for n in () if cfg.bare_only else cfg.devices:
            rates[n] = figures[f"loop, {n} device(s): steps/s"] = loop_rate(cfg, data, Path(tmp) / f"run{n}", n)
            print(f"full loop, {n} device(s): {rates[n]:.1f} steps/s "
                  f"({rates[n] / bare:.0%} of the bare update; x{rates[n] / rates[cfg.devices[0]]:.2f} "
                  f"vs {cfg.devices[0]} device(s))")
    if cfg.json is not None:
        cfg.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main(tyro.cli(BenchConfig))
