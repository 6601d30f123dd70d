"""The MRN quasimetric (metric residual network) used by the MQE critic.

The latent vectors are split into `num_components` chunks; in each chunk the first half gives an
asymmetric part `relu(max(x - y))` and the second half a symmetric part `||x - y||_2` (with a tiny
epsilon inside the root so its gradient stays finite at x == y). The distance is the mean over
chunks of (asymmetric + symmetric), divided by sqrt of the latent size, as in the authors' code.

Two ways to evaluate it:
- `mrn_distance(x, y)`: elementwise over broadcast leading axes; the reference.
- `mrn_pairwise(x, y)`: all pairs of two sets, (..., B, D) x (..., C, D) -> (..., B, C), without
  materialising the (..., B, C, D) difference tensor: the symmetric part is a matrix product
  (|x|^2 + |y|^2 - 2 x.y, both sets first moved by the mean of y, which leaves it unchanged) and
  the asymmetric part a running maximum that keeps only the int8 arg-max of each pair for a
  hand-written backward pass.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from mqe_model.parallel import replicated_in_mesh

EPS = 1e-6  # inside the square root of the symmetric part


def _split(x: jax.Array, num_components: int) -> tuple[jax.Array, jax.Array]:
    """(..., D) -> asymmetric and symmetric halves, each (..., num_components, D / (2 * num_components))."""
    dim = x.shape[-1]
    if dim % (2 * num_components):
        raise ValueError(
            f"latent size {dim} must be divisible by 2 * num_components = {2 * num_components}"
        )
    chunks = x.reshape(*x.shape[:-1], num_components, dim // num_components)
    half = dim // num_components // 2
    return chunks[..., :half], chunks[..., half:]


def mrn_distance(x: jax.Array, y: jax.Array, num_components: int = 8) -> jax.Array:
    """MRN distance d(x, y) for x, y of shape (..., D), broadcasting over leading axes -> (...)."""
    x, y = jnp.broadcast_arrays(x, y)
    x_asym, x_sym = _split(x, num_components)
    y_asym, y_sym = _split(y, num_components)
    asym = jax.nn.relu(jnp.max(x_asym - y_asym, axis=-1))
    sym = jnp.sqrt(jnp.sum(jnp.square(x_sym - y_sym), axis=-1) + EPS)
    return jnp.mean(asym + sym, axis=-1) / math.sqrt(x.shape[-1])


def mrn_pairwise_naive(x: jax.Array, y: jax.Array, num_components: int = 8) -> jax.Array:
    """All-pairs MRN distance by broadcasting: (..., B, D), (..., C, D) -> (..., B, C)."""
    y = replicated_in_mesh(y)
    return mrn_distance(x[..., :, None, :], y[..., None, :, :], num_components)


@jax.custom_vjp
def _pairwise_max_diff(xa: jax.Array, ya: jax.Array) -> jax.Array:
    """max_k (xa[..., b, c, k] - ya[..., f, c, k]), laid out as (..., C, B, F)."""
    return _max_and_argmax(xa, ya)[0]


def _max_and_argmax(xa: jax.Array, ya: jax.Array) -> tuple[jax.Array, jax.Array]:
    # A running maximum over k, unrolled: XLA turns it into one elementwise kernel instead of a
    # reduction over a materialised (..., B, F, C, K) difference tensor. With the other set's
    # index F last, neighbouring threads read neighbouring ya values (coalesced loads).
    xa_t = jnp.moveaxis(xa, -3, -1)  # (..., C, K, B)
    ya_t = jnp.moveaxis(ya, -3, -1)  # (..., C, K, F)
    best = xa_t[..., 0, :, None] - ya_t[..., 0, None, :]
    arg = jnp.zeros(best.shape, _index_dtype(xa.shape[-1]))
    for k in range(1, xa.shape[-1]):
        d = xa_t[..., k, :, None] - ya_t[..., k, None, :]
        better = d > best
        best = jnp.where(better, d, best)
        arg = jnp.where(better, jnp.asarray(k, arg.dtype), arg)
    return best, arg


def _index_dtype(size: int) -> jnp.dtype:
    return jnp.int8 if size <= 127 else jnp.int32


def _pairwise_max_diff_fwd(xa, ya):
    best, arg = _max_and_argmax(xa, ya)
    return best, (arg, xa.shape[-1])


def _pairwise_max_diff_bwd(res, g):
    arg, size = res  # arg and g: (..., C, B, F)
    # The gradient reaches only the arg-max coordinate of each pair: grad_xa[b, c, k] sums g over
    # the pairs (b, f, c) whose arg-max is k. With the summed axis last, each sum is a contiguous
    # row reduction over a one-hot built on the fly, never stored.
    ks = jnp.arange(size, dtype=arg.dtype)

    def scatter(g_t: jax.Array, arg_t: jax.Array) -> jax.Array:
        hit = arg_t[..., None, :] == ks[:, None]  # (..., C, rows, K, summed)
        summed = jnp.sum(jnp.where(hit, g_t[..., None, :], 0.0), axis=-1)  # (..., C, rows, K)
        return jnp.swapaxes(summed, -3, -2)  # (..., rows, C, K)

    grad_xa = scatter(g, arg)
    grad_ya = -scatter(jnp.swapaxes(g, -2, -1), jnp.swapaxes(arg, -2, -1))
    return grad_xa, grad_ya


_pairwise_max_diff.defvjp(_pairwise_max_diff_fwd, _pairwise_max_diff_bwd)


@functools.partial(jax.jit, static_argnames=("num_components",))
def mrn_pairwise(x: jax.Array, y: jax.Array, num_components: int = 8) -> jax.Array:
    """All-pairs MRN distance, (..., B, D) x (..., C, D) -> (..., B, C), memory-lean (see module doc)."""
    y = replicated_in_mesh(y)  # data-parallel: each device pairs its rows with all of y
    x_asym, x_sym = _split(x, num_components)
    y_asym, y_sym = _split(y, num_components)
    # Everything below is laid out (..., components, B, C) so the last axis is the second set.
    asym = jax.nn.relu(_pairwise_max_diff(x_asym, y_asym))
    # |x - y|^2 is the same about any centre. About y's mean the squares below stay as small as the
    # sets' spread, where about the origin a common offset m costs float32 ~m^2 * 1e-7 of
    # cancellation per pair (an offset of 1000 turns a 10-step distance into 0-20 steps).
    centre = jax.lax.stop_gradient(jnp.mean(y_sym, axis=-3, keepdims=True))
    x_sym, y_sym = x_sym - centre, y_sym - centre
    x_sq = jnp.sum(jnp.square(x_sym), axis=-1)  # (..., B, components)
    y_sq = jnp.sum(jnp.square(y_sym), axis=-1)
    cross = jnp.einsum(
        "...bnk,...cnk->...nbc", x_sym, y_sym, precision=jax.lax.Precision.HIGHEST
    )
    sq = jnp.swapaxes(x_sq, -2, -1)[..., :, None] + jnp.swapaxes(y_sq, -2, -1)[..., None, :]
    # Rounding can push |x - y|^2 slightly below zero when x is close to y.
    sym = jnp.sqrt(jnp.maximum(sq - 2.0 * cross, 0.0) + EPS)
    return jnp.mean(asym + sym, axis=-3) / math.sqrt(x.shape[-1])
