"""Host cost of an act's weight arrays: how many a served policy passes per call, and what JAX's
per-call argument handling costs for that many.

    python -m benchmarks.dispatch_args                       # the bridge preset, every arrangement
    python -m benchmarks.dispatch_args --preset tiny --image-size 16 --set encoder=resnet_tiny

Writes a random checkpoint of `--preset`, prints the number and size of the weight arrays that each
encoder arrangement it has (`registry.encoder_arrangements`) passes to every act, then times a trivial
jitted function called with 1, 10, 100 and 300 small array arguments (`--counts`; p50 over `--calls`),
so the per-array cost can be read against the act's time. The 1-argument call is the baseline: the
figures are printed with their ratio to it.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import tyro


@dataclasses.dataclass(frozen=True)
class Args:
    """Weight arrays per act, and JAX's per-call cost of array arguments."""

    preset: str = "bridge"  # MQE preset of the random checkpoint
    set: tuple[str, ...] = ()  # config overrides of the random checkpoint, e.g. encoder=resnet_tiny
    image_size: int = 128  # image size of the random checkpoint
    counts: tuple[int, ...] = (1, 10, 100, 300)  # array arguments of the timed calls; the first is the baseline
    calls: int = 300  # timed calls per count


def main(argv: list[str] | None = None) -> int:
    """Print the figures."""
    args = tyro.cli(Args, args=argv)
    if not args.counts or min(args.counts) < 1 or args.calls < 3:
        print("dispatch_args: error: --counts must be >= 1 (at least one) and --calls >= 3", file=sys.stderr)
        return 2
    from mqe_model.agents.registry import encoder_arrangements
    from mqe_model.policy import load_policy, serving_fns
    from server.random_checkpoint import write_random_checkpoint

    try:
        checkpoint = write_random_checkpoint(Path(tempfile.mkdtemp(prefix="dispatch-bench-")), "mqe", args.preset,
                                             args.set, args.image_size)
    except ValueError as e:
        print(f"dispatch_args: error: {e}", file=sys.stderr)
        return 2
    policy = load_policy(checkpoint)
    print(f"mqe {args.preset} checkpoint, on {jax.devices()[0].device_kind}, jax {jax.__version__}")
    for arrangement in encoder_arrangements(policy.agent_name, policy.config):
        prepare = serving_fns(policy.agent_name, policy.config, policy.action_stats, arrangement)[0]
        leaves = jax.tree_util.tree_leaves(prepare(policy.params))
        megabytes = sum(x.size * x.dtype.itemsize for x in leaves) / 2**20
        print(f"{arrangement}: {len(leaves)} weight arrays, {megabytes:.1f} MB")
    baseline = None
    for count in args.counts:
        us = call_us(count, args.calls)
        baseline = us if baseline is None else baseline
        print(f"{count} array arguments: {us:.1f} us a call ({us / baseline:.2f}x the first)")
    return 0


def call_us(count: int, calls: int) -> float:
    """p50 microseconds of a trivial jitted call that takes `count` small arrays (and uses one)."""
    arrays, x = [jnp.ones((4,)) for _ in range(count)], jnp.ones((4,))
    call = jax.jit(lambda arrays, x: x + arrays[0])
    call(arrays, x).block_until_ready()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call(arrays, x).block_until_ready()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
