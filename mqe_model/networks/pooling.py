"""Max pooling whose backward pass is strided pads instead of XLA's select-and-scatter.

`flax.linen.max_pool` differentiates through `lax.reduce_window`, whose transpose is XLA's
SelectAndScatter. On an H100 the `sim` preset's update spends 11 % of its kernel time in the four
largest of those scatters (`docs/performance.md`). Here the forward pass is the same reduce-window;
the backward pass finds each window's first maximum (the element SelectAndScatter picks: it scans the
window in row-major order and keeps the earlier of equal values) and routes the window's cotangent
to it through strided pads: no scatter. Values and gradients equal `max_pool`'s, ties included.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax


def window_taps(padded: jax.Array, window: tuple[int, int], strides: tuple[int, int],
                 out_hw: tuple[int, int]) -> list[jax.Array]:
    """The element at each window offset (row-major) of every output position, each (N, oh, ow, C):
    the strided slices of the padded NHWC input that pooling and `conv_as_matmul` read."""
    (wh, ww), (sh, sw), (oh, ow) = window, strides, out_hw
    return [padded[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
            for i in range(wh) for j in range(ww)]


def _pads(x: jax.Array, window: tuple[int, int], strides: tuple[int, int], padding: str):
    return lax.padtype_to_pads(x.shape[1:3], window, strides, padding)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def max_pool(x: jax.Array, window: tuple[int, int], strides: tuple[int, int], padding: str) -> jax.Array:
    """2-D max pooling of NHWC `x`; padding 'SAME' or 'VALID' (padded elements never win)."""
    return _forward(x, window, strides, padding)


def _forward(x: jax.Array, window: tuple[int, int], strides: tuple[int, int], padding: str) -> jax.Array:
    pads = _pads(x, window, strides, padding)
    return lax.reduce_window(x, jnp.array(-jnp.inf, x.dtype), lax.max, (1, *window, 1), (1, *strides, 1),
                             ((0, 0), *pads, (0, 0)))


def _max_pool_fwd(x, window, strides, padding):
    y = _forward(x, window, strides, padding)
    return y, (x, y)


def _max_pool_bwd(window, strides, padding, residuals, cotangent):
    x, y = residuals
    pads = _pads(x, window, strides, padding)
    padded = jnp.pad(x, ((0, 0), *pads, (0, 0)), constant_values=-jnp.inf)
    taps = window_taps(padded, window, strides, y.shape[1:3])
    # Offset of each window's first maximum: the later taps are tried first so the earliest equal one
    # overwrites them.
    first = jnp.zeros(y.shape, jnp.int8)
    for k in range(len(taps) - 1, -1, -1):
        first = jnp.where(taps[k] == y, jnp.int8(k), first)
    (sh, sw), (oh, ow) = strides, y.shape[1:3]
    grad = jnp.zeros(padded.shape, cotangent.dtype)
    zero = jnp.zeros((), cotangent.dtype)
    for k in range(len(taps)):
        i, j = divmod(k, window[1])
        routed = jnp.where(first == k, cotangent, zero)
        grad = grad + lax.pad(routed, zero, ((0, 0, 0), (i, padded.shape[1] - i - sh * (oh - 1) - 1, sh - 1),
                                             (j, padded.shape[2] - j - sw * (ow - 1) - 1, sw - 1), (0, 0, 0)))
    (top, _), (left, _) = pads
    return (grad[:, top:top + x.shape[1], left:left + x.shape[2]],)


max_pool.defvjp(_max_pool_fwd, _max_pool_bwd)
