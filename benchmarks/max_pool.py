"""The encoders' max pooling (forward and backward) against flax's `nn.max_pool`, same run, as a ratio.

Shapes are the `sim` preset's three impala pools over one update's critic pass (768 images of
64 x 64), bf16; both give the same values and gradients (tests/mqe_model/networks/test_pooling.py).

    python -m benchmarks.max_pool                     # CPU or one GPU
    python -m benchmarks.max_pool --images 256 --dtype float32
"""

from __future__ import annotations

import dataclasses
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import tyro

from mqe_model.networks.pooling import max_pool


@dataclasses.dataclass(frozen=True)
class PoolBenchConfig:
    """What to time."""

    images: int = 768  # images per pass (the sim critic's goals, waypoints and states)
    size: int = 64  # px, the first pool's input side; each later pool takes half
    channels: tuple[int, ...] = (16, 32, 32)  # channels at each pool (impala_small's stacks)
    dtype: str = "bfloat16"  # activation dtype (the sim preset's convolutions)
    iters: int = 20  # timed calls per implementation


def seconds_per_call(pool, inputs: list[jax.Array], iters: int) -> float:
    """Median seconds of one jitted forward + backward over every pool of `inputs`."""

    def loss(xs):
        return sum(jnp.sum(pool(x).astype(jnp.float32) ** 2) for x in xs)

    step = jax.jit(jax.grad(loss))
    jax.block_until_ready(step(inputs))
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        jax.block_until_ready(step(inputs))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(cfg: PoolBenchConfig) -> None:
    rng = np.random.default_rng(0)
    inputs = [jnp.asarray(rng.normal(size=(cfg.images, cfg.size >> k, cfg.size >> k, c)), cfg.dtype)
              for k, c in enumerate(cfg.channels)]
    flax_s = seconds_per_call(lambda x: nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME"), inputs, cfg.iters)
    ours_s = seconds_per_call(lambda x: max_pool(x, (3, 3), (2, 2), "SAME"), inputs, cfg.iters)
    print(f"device: {jax.devices()[0].device_kind}; {cfg.images} images, {cfg.dtype}")
    print(f"flax max_pool forward+backward: {flax_s * 1e3:.3f} ms")
    print(f"encoders' max_pool forward+backward: {ours_s * 1e3:.3f} ms ({flax_s / ours_s:.2f}x flax's speed)")


if __name__ == "__main__":
    main(tyro.cli(PoolBenchConfig))
