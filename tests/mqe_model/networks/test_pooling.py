"""The encoders' max pooling: flax's values and gradients exactly, ties included."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mqe_model.networks.pooling import max_pool


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 3), height=st.integers(3, 12), width=st.integers(3, 12), channels=st.integers(1, 4),
       window=st.sampled_from([(3, 3), (2, 2), (2, 3)]), strides=st.sampled_from([(2, 2), (1, 1), (1, 2), (3, 3)]),
       padding=st.sampled_from(["SAME", "VALID"]), dtype=st.sampled_from([jnp.float32, jnp.bfloat16]),
       seed=st.integers(0, 2**16))
def test_values_and_gradients_equal_flax_max_pool(batch, height, width, channels, window, strides, padding,
                                                  dtype, seed):
    rng = np.random.default_rng(seed)
    # Small integers: most windows hold equal maxima, and sums of integer cotangents are exact.
    x = jnp.asarray(rng.integers(-2, 3, size=(batch, height, width, channels)), dtype)
    want, want_vjp = jax.vjp(lambda v: nn.max_pool(v, window, strides=strides, padding=padding), x)
    got, got_vjp = jax.vjp(lambda v: max_pool(v, window, strides, padding), x)
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    cotangent = jnp.asarray(rng.integers(-3, 4, size=want.shape), dtype)
    np.testing.assert_array_equal(np.asarray(got_vjp(cotangent)[0], np.float32),
                                  np.asarray(want_vjp(cotangent)[0], np.float32))


def test_each_window_sends_its_cotangent_to_its_first_maximum_only():
    # One 3 x 3 window (VALID) whose maximum 5 appears at offsets (0, 2) and (2, 0): the first in
    # row-major order takes the whole cotangent.
    x = jnp.asarray([[1, 0, 5], [2, 3, 4], [5, 0, 1]], jnp.float32)[None, :, :, None]
    grad = jax.grad(lambda v: 7.0 * max_pool(v, (3, 3), (1, 1), "VALID").sum())(x)
    expected = np.zeros((3, 3), np.float32)
    expected[0, 2] = 7.0
    np.testing.assert_array_equal(np.asarray(grad)[0, :, :, 0], expected)


def test_padding_never_takes_the_gradient_of_a_negative_window():
    x = -jnp.ones((1, 2, 2, 1), jnp.float32)
    y, vjp = jax.vjp(lambda v: max_pool(v, (3, 3), (2, 2), "SAME"), x)
    np.testing.assert_array_equal(np.asarray(y), -np.ones((1, 1, 1, 1)))
    np.testing.assert_array_equal(np.asarray(vjp(jnp.ones_like(y))[0]).ravel(), [1.0, 0.0, 0.0, 0.0])
