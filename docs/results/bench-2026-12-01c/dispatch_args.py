"""Served weight arrays of the `bridge` policy per arrangement, and JAX's per-call cost of array arguments.

    JAX_PLATFORMS=cpu PYTHONPATH=. python docs/results/bench-2026-12-01c/dispatch_args.py
"""

import pathlib
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp

from mqe_model.policy import load_policy, serving_fns
from server.random_checkpoint import write_random_checkpoint

policy = load_policy(write_random_checkpoint(pathlib.Path(tempfile.mkdtemp()), "mqe", "bridge", (), 128))
for arrangement in ("separate", "stacked", "twin"):
    prepare = serving_fns(policy.agent_name, policy.config, policy.action_stats, arrangement)[0]
    leaves = jax.tree_util.tree_leaves(prepare(policy.params))
    print(f"{arrangement}: {len(leaves)} arrays, {sum(x.size * x.dtype.itemsize for x in leaves) / 2**20:.1f} MB")
for count in (1, 10, 100, 300):
    arrays, x = [jnp.ones((4,)) for _ in range(count)], jnp.ones((4,))
    call = jax.jit(lambda arrays, x: x + arrays[0])
    call(arrays, x).block_until_ready()
    times = []
    for _ in range(300):
        start = time.perf_counter()
        call(arrays, x).block_until_ready()
        times.append((time.perf_counter() - start) * 1e6)
    print(f"{count} array arguments: {statistics.median(times):.1f} us a call")
