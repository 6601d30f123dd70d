"""Where the time of one MQE update goes: GPU kernels grouped by name, from a JAX profiler trace.

    python benchmarks/profile_train_step.py --preset ogbench_state --seeds 1

Prints the kernels that take the most device time per update, their share, and the number of
kernel launches per update, so that an optimisation can be aimed at what dominates.
"""

from __future__ import annotations

import collections
import dataclasses
import tempfile
from pathlib import Path

import jax
import numpy as np
import tyro

from benchmarks.train_step import BenchConfig, random_batches
from mqe_model.agents import mqe


@dataclasses.dataclass(frozen=True)
class ProfileConfig:
    """What to profile."""

    preset: str = "ogbench_state"  # MQE preset
    seeds: int = 1  # 1: a single agent; more: vmapped seeds
    matmul_precision: str = "tensorfloat32"  # network matmul precision
    pairwise: str = "fused"  # all-pairs MRN variant
    scan: int = 10  # updates per dispatch
    top: int = 25  # kernels to list


def main(cfg: ProfileConfig) -> None:
    bench = BenchConfig(scan=cfg.scan)
    config = dataclasses.replace(
        mqe.get_config(cfg.preset), pairwise=cfg.pairwise, matmul_precision=cfg.matmul_precision
    )
    rng = np.random.default_rng(0)
    example = random_batches(rng, (), bench, 2)
    if cfg.seeds == 1:
        state = mqe.MQEAgent.create(0, example, config)
        batches = random_batches(rng, (cfg.scan,), bench, config.batch_size)
        step = lambda s, b: s.update_many(b)  # noqa: E731
    else:
        state = mqe.create_seeds(list(range(cfg.seeds)), example, config)
        batches = random_batches(rng, (cfg.scan, cfg.seeds), bench, config.batch_size)
        step = mqe.update_many_seeds
    for _ in range(3):
        state, info = step(state, batches)
    jax.block_until_ready(info)
    with tempfile.TemporaryDirectory() as logdir:
        with jax.profiler.trace(logdir):
            for _ in range(3):
                state, info = step(state, batches)
            jax.block_until_ready(info)
        trace = next(Path(logdir).rglob("*.xplane.pb"))
        data = jax.profiler.ProfileData.from_file(str(trace))
    totals: dict[str, float] = collections.defaultdict(float)
    counts: collections.Counter = collections.Counter()
    for plane in data.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        for line in plane.lines:
            if "Stream" not in line.name and "stream" not in line.name:
                continue
            for event in line.events:
                totals[event.name] += event.duration_ns
                counts[event.name] += 1
    updates = 3 * cfg.scan
    total = sum(totals.values())
    print(f"device {jax.devices()[0].device_kind}: {total / updates / 1e3:.1f} us of kernels per update, "
          f"{sum(counts.values()) / updates:.0f} kernel launches per update")
    for name, ns in sorted(totals.items(), key=lambda kv: -kv[1])[: cfg.top]:
        print(f"{ns / updates / 1e3:9.1f} us {100 * ns / total:5.1f}%  x{counts[name] / updates:4.1f}  {name[:90]}")


if __name__ == "__main__":
    main(tyro.cli(ProfileConfig))
