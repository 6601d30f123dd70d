"""The fused all-pairs MRN distance against the elementwise one when both sets share an offset.

    JAX_PLATFORMS=cpu PYTHONPATH=. python docs/results/ogbench-2026-12-01b/offset_error.py

"before": `mrn_pairwise` as of a5a3726 (|x|^2 + |y|^2 - 2 x.y about the origin), read from git;
"after": the tree's (about y's mean). Each pair (x_i, y_i) is ~10 environment steps apart.
"""
import math

import jax
import numpy as np
from before import quasimetric_before  # this folder, beside the script

from mqe_model.quasimetric import mrn_pairwise, mrn_pairwise_naive

before = quasimetric_before()

STEP = -math.log(0.995)
print("| spread | offset | d(x_i, y_i), steps | before: |fused - naive| mean / max, steps | after |")
print("| --- | --- | --- | --- | --- |")
for spread in (1.0, 10.0, 50.0):
    for offset in (0.0, 100.0, 1000.0):
        x = spread * jax.random.normal(jax.random.PRNGKey(0), (256, 512)) + offset
        y = x + 0.15 * jax.random.normal(jax.random.PRNGKey(1), (256, 512))
        naive = np.asarray(mrn_pairwise_naive(x, y))
        cells = []
        for fn in (before.mrn_pairwise, mrn_pairwise):
            err = np.abs(np.asarray(fn(x, y)) - naive) / STEP
            cells.append(f"{err.mean():.3f} / {err.max():.3f}")
        print(f"| {spread:g} | {offset:g} | {np.median(np.diagonal(naive)) / STEP:.1f} | {cells[0]} | {cells[1]} |")
