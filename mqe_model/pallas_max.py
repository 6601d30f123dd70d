"""The all-pairs maximum of MRN's asymmetric part as Pallas kernels (opt-in: MQE `pairwise="pallas"`).

    best[n, b, f] = max_k (x[n, b, k] - y[n, f, k]),   arg[n, b, f] = its first arg-max k

XLA's version (`quasimetric._max_and_argmax`) is one elementwise kernel that loads x[b, k] and
y[f, k] again for every pair: ~2K loads per output, and with 8 vmapped seeds the largest item of
an MQE update on an H100 (~316 us, docs/benchmarks.md). Here a (block x block) tile of pairs reads
its block rows of x and y once, like a matrix product with max-plus arithmetic. The backward pass
sums the upstream gradient into the arg-max coordinate of each pair, a block of rows (or columns)
across the whole other set at a time, one coordinate after another.

On a GPU the kernels compile through Pallas' Triton backend; elsewhere they run in Pallas'
interpreter, which is exact but slow (CPU tests only). Block shapes must be powers of two for
Triton: `supported` says whether a shape can use these kernels.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCKS = (32, 16, 8)  # tile sizes tried, largest first; a tile is block x block pairs
MAX_SPAN = 512  # the backward kernels hold a block of rows across all columns (and the converse)


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _block(n: int) -> int | None:
    return next((b for b in BLOCKS if n % b == 0), None)


def supported(rows: int, cols: int, width: int) -> bool:
    """Whether (rows x cols pairs, width coordinates) fits the kernels' power-of-two tiles."""
    return (all(map(_power_of_two, (rows, cols, width))) and _block(rows) is not None
            and _block(cols) is not None and max(rows, cols) <= MAX_SPAN)


def _interpret() -> bool:
    return jax.default_backend() != "gpu"


def _squeezed() -> object:
    return getattr(pl, "squeezed", None)  # older JAX spells a squeezed block dimension None


def _forward_kernel(x_ref, y_ref, best_ref, arg_ref):
    # x_ref (block, K) and y_ref (block, K): a running maximum over k on a block x block tile, each
    # coordinate column read once per tile (2D values only: Triton keeps them in registers).
    width = x_ref.shape[1]
    best = x_ref[:, 0:1] - y_ref[:, 0:1].T
    arg = jnp.zeros(best.shape, jnp.int32)
    for k in range(1, width):
        diff = x_ref[:, k:k + 1] - y_ref[:, k:k + 1].T
        better = diff > best  # strict: the first k reaching the maximum wins, as in XLA's version
        best = jnp.where(better, diff, best)
        arg = jnp.where(better, k, arg)
    best_ref[...] = best
    arg_ref[...] = arg.astype(arg_ref.dtype)


def max_and_argmax(x: jax.Array, y: jax.Array, arg_dtype: jnp.dtype = jnp.int8) -> tuple[jax.Array, jax.Array]:
    """(N, B, K), (N, F, K) float32 -> best (N, B, F) float32 and arg (N, B, F) `arg_dtype`."""
    n, rows, width = x.shape
    cols = y.shape[1]
    br, bc = _block(rows), _block(cols)
    squeezed = _squeezed()
    return pl.pallas_call(
        _forward_kernel,
        grid=(n, rows // br, cols // bc),
        in_specs=[pl.BlockSpec((squeezed, br, width), lambda i, r, c: (i, r, 0)),
                  pl.BlockSpec((squeezed, bc, width), lambda i, r, c: (i, c, 0))],
        out_specs=[pl.BlockSpec((squeezed, br, bc), lambda i, r, c: (i, r, c))] * 2,
        out_shape=[jax.ShapeDtypeStruct((n, rows, cols), jnp.float32),
                   jax.ShapeDtypeStruct((n, rows, cols), arg_dtype)],
        interpret=_interpret(),
    )(x, y)


def _scatter_kernel(g_ref, arg_ref, out_ref, *, over_rows: bool):
    # g_ref, arg_ref: a block of rows x all columns, summed along each row, or (over_rows) all rows x
    # a block of columns, summed down each column; out_ref (block, K) gets one coordinate at a time.
    g, arg = g_ref[...], arg_ref[...].astype(jnp.int32)
    axis = 0 if over_rows else 1
    for k in range(out_ref.shape[1]):
        out_ref[:, k:k + 1] = jnp.sum(jnp.where(arg == k, g, 0.0), axis=axis)[:, None]


def scatter_to_argmax(g: jax.Array, arg: jax.Array, width: int, over_rows: bool) -> jax.Array:
    """Sum g (N, B, F) into the arg-max coordinate of each pair: (N, B, width) summing over F, or
    with `over_rows` (N, F, width) summing over B."""
    n, rows, cols = g.shape
    squeezed = _squeezed()
    if over_rows:
        block = _block(cols)
        spec = pl.BlockSpec((squeezed, rows, block), lambda i, c: (i, 0, c))
        out = (n, cols, width)
    else:
        block = _block(rows)
        spec = pl.BlockSpec((squeezed, block, cols), lambda i, r: (i, r, 0))
        out = (n, rows, width)
    return pl.pallas_call(
        functools.partial(_scatter_kernel, over_rows=over_rows),
        grid=(n, out[1] // block),
        in_specs=[spec, spec],
        out_specs=pl.BlockSpec((squeezed, block, width), lambda i, r: (i, r, 0)),
        out_shape=jax.ShapeDtypeStruct(out, jnp.float32),
        interpret=_interpret(),
    )(g, arg)


@jax.custom_vjp
def pairwise_max_diff(x: jax.Array, y: jax.Array) -> jax.Array:
    """max_k (x[n, b, k] - y[n, f, k]) for x (N, B, K), y (N, F, K) -> (N, B, F)."""
    return max_and_argmax(x, y)[0]


def _fwd(x, y):
    best, arg = max_and_argmax(x, y)
    return best, (arg, x.shape[-1])


def _bwd(res, g):
    arg, width = res
    return (scatter_to_argmax(g, arg, width, over_rows=False),
            -scatter_to_argmax(g, arg, width, over_rows=True))


pairwise_max_diff.defvjp(_fwd, _bwd)
