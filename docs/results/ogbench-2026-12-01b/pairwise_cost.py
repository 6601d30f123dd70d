"""Forward + backward time of `mrn_pairwise` before (a5a3726, read from git) and after the centring.

    JAX_PLATFORMS=cpu PYTHONPATH=. python docs/results/ogbench-2026-12-01b/pairwise_cost.py
"""
import time

import jax
import jax.numpy as jnp
from before import quasimetric_before  # this folder, beside the script

from mqe_model.quasimetric import mrn_pairwise

before = quasimetric_before()

x = jax.random.normal(jax.random.PRNGKey(0), (2, 256, 512))
y = jax.random.normal(jax.random.PRNGKey(1), (2, 256, 512))
for round_ in (1, 2):  # interleaved, so machine load falls on both alike
    for name, fn in (("before", before.mrn_pairwise), ("after", mrn_pairwise)):
        grad = jax.jit(jax.grad(lambda a, b, fn=fn: jnp.sum(jnp.exp(-fn(a, b))), argnums=(0, 1)))
        jax.block_until_ready(grad(x, y))
        start = time.perf_counter()
        for _ in range(20):
            jax.block_until_ready(grad(x, y))
        print(f"round {round_} {name}: {(time.perf_counter() - start) / 20 * 1e3:.1f} ms per forward + backward "
              f"(E=2, B=256, D=512, on {jax.devices()[0].platform})")
