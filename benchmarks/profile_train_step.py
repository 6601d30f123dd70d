"""Where the time of one MQE update goes: GPU kernels grouped by name, from a JAX profiler trace.

    python benchmarks/profile_train_step.py --preset ogbench_state --seeds 1
    python benchmarks/profile_train_step.py --seeds 2 --set flat_optimizer=false

Prints the kernels that take the most device time per update, their share, and the number of
kernel launches per update, so that an optimisation can be aimed at what dominates. A second trace,
its dispatches 20 ms apart, gives each dispatch's device span (first kernel start to last kernel end)
per update and the share of it some kernel ran; the rest is the device idle between kernels, waiting
for the next one to be launched.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import tyro

from benchmarks.kernels import kernel_profile
from benchmarks.train_step import BenchConfig, overridden, random_batches
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
    set: tuple[str, ...] = ()  # further agent overrides, key=value, e.g. flat_optimizer=false

    def agent_config(self) -> mqe.Config:
        """The profiled configuration; a bad override exits with its error."""
        config = dataclasses.replace(mqe.get_config(self.preset), pairwise=self.pairwise,
                                     matmul_precision=self.matmul_precision)
        return overridden(config, self.set, "--set")


DISPATCH_GAP_S = 0.02  # idle time between the dispatches of the spaced trace, which tells them apart


def main(cfg: ProfileConfig) -> None:
    bench = BenchConfig(scan=cfg.scan)
    config = cfg.agent_config()
    rng = np.random.default_rng(0)
    example = random_batches(rng, (), bench, 2)
    if cfg.seeds == 1:
        state = mqe.Agent.create(0, example, config)
        batches = random_batches(rng, (cfg.scan,), bench, config.batch_size)
        step = lambda s, b: s.update_many(b)  # noqa: E731
    else:
        state = mqe.create_seeds(list(range(cfg.seeds)), example, config)
        batches = random_batches(rng, (cfg.scan, cfg.seeds), bench, config.batch_size)
        step = mqe.update_many_seeds
    for _ in range(3):
        state, info = step(state, batches)
    jax.block_until_ready(info)

    def dispatch() -> None:
        nonlocal state
        state, info = step(state, batches)
        jax.block_until_ready(info)

    kernel_us, launches, rows, *_ = kernel_profile(dispatch, 3)
    print(f"device {jax.devices()[0].device_kind}: {kernel_us / cfg.scan:.1f} us of kernels per update, "
          f"{launches / cfg.scan:.0f} kernel launches per update")
    spaced = kernel_profile(dispatch, 3, pause_s=DISPATCH_GAP_S)
    if spaced.span_us is not None:
        print(f"device span per update {spaced.span_us / cfg.scan:.1f} us, kernels busy {spaced.busy:.0%} of it "
              f"(the rest: the device waiting between kernels)")
    for name, us, count in rows[: cfg.top]:
        print(f"{us / cfg.scan:9.1f} us {100 * us / kernel_us:5.1f}%  x{count / cfg.scan:4.1f}  {name[:90]}")


if __name__ == "__main__":
    main(tyro.cli(ProfileConfig))
