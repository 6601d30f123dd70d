import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from mqe_model.quasimetric import EPS, mrn_distance, mrn_pairwise, mrn_pairwise_naive

jax.config.update("jax_enable_x64", False)


def test_hand_computed_single_component():
    # D = 4, one component: asymmetric half = dims 0-1, symmetric half = dims 2-3.
    x = jnp.array([1.0, 3.0, 0.0, 0.0])
    y = jnp.array([0.0, 1.0, 3.0, 4.0])
    # asym = relu(max(1, 2)) = 2; sym = sqrt(9 + 16 + eps); mean over 1 chunk; / sqrt(4).
    expected_xy = (2.0 + math.sqrt(25.0 + EPS)) / 2.0
    # Reverse: asym = relu(max(-1, -2)) = 0.
    expected_yx = (0.0 + math.sqrt(25.0 + EPS)) / 2.0
    assert float(mrn_distance(x, y, num_components=1)) == pytest.approx(expected_xy, rel=1e-6)
    assert float(mrn_distance(y, x, num_components=1)) == pytest.approx(expected_yx, rel=1e-6)


def test_hand_computed_two_components():
    # D = 8, two chunks of 4: chunk 0 = dims 0-3, chunk 1 = dims 4-7.
    x = jnp.array([2.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    y = jnp.array([0.0, 0.0, 1.0, 1.0, 1.0, 5.0, 0.0, 3.0])
    chunk0 = 2.0 + math.sqrt(0.0 + EPS)  # asym max(2, 0) = 2, sym 0
    chunk1 = 0.0 + math.sqrt(9.0 + EPS)  # asym max(-1, -5) -> relu 0, sym |(0, -3)| = 3
    expected = (chunk0 + chunk1) / 2 / math.sqrt(8)
    assert float(mrn_distance(x, y, num_components=2)) == pytest.approx(expected, rel=1e-6)


def test_broadcasting_over_leading_axes():
    x = jax.random.normal(jax.random.PRNGKey(0), (3, 1, 32))
    y = jax.random.normal(jax.random.PRNGKey(1), (1, 5, 32))
    d = mrn_distance(x, y, num_components=4)
    assert d.shape == (3, 5)
    assert float(d[2, 4]) == pytest.approx(float(mrn_distance(x[2, 0], y[0, 4], 4)), rel=1e-6)


def test_latent_size_must_split_into_components():
    with pytest.raises(ValueError, match="divisible"):
        mrn_distance(jnp.zeros(10), jnp.zeros(10), num_components=8)


vectors = arrays(np.float32, (3, 16), elements=st.floats(-10, 10, width=32))


@settings(max_examples=200, deadline=None)
@given(vectors)
def test_quasimetric_properties(v):
    x, y, z = (jnp.asarray(row) for row in v)
    d = lambda a, b: float(mrn_distance(a, b, num_components=2))  # noqa: E731
    assert d(x, y) >= 0.0
    # With the epsilon inside the root, d(x, x) is exactly sqrt(eps) / sqrt(D), not 0.
    assert d(x, x) == pytest.approx(math.sqrt(EPS) / 4.0, rel=1e-3)
    assert d(x, z) <= d(x, y) + d(y, z) + 1e-5


def test_pairwise_matches_elementwise_and_naive():
    x = jax.random.normal(jax.random.PRNGKey(2), (2, 7, 64))
    y = jax.random.normal(jax.random.PRNGKey(3), (2, 5, 64))
    fused = mrn_pairwise(x, y, num_components=8)
    naive = mrn_pairwise_naive(x, y, num_components=8)
    assert fused.shape == (2, 7, 5)
    np.testing.assert_allclose(fused, naive, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        fused[1, 3, 4], mrn_distance(x[1, 3], y[1, 4], num_components=8), rtol=1e-5
    )


def test_pairwise_gradients_match_autodiff_of_naive():
    x = jax.random.normal(jax.random.PRNGKey(4), (2, 9, 32))
    y = jax.random.normal(jax.random.PRNGKey(5), (2, 6, 32))
    weights = jax.random.normal(jax.random.PRNGKey(6), (2, 9, 6))

    def loss(fn, a, b):
        d = fn(a, b, num_components=4)
        return jnp.sum(weights * d) + jnp.sum(jnp.exp(-d))

    fused = jax.grad(lambda a, b: loss(mrn_pairwise, a, b), argnums=(0, 1))(x, y)
    naive = jax.grad(lambda a, b: loss(mrn_pairwise_naive, a, b), argnums=(0, 1))(x, y)
    for f, n in zip(fused, naive, strict=True):
        np.testing.assert_allclose(f, n, rtol=1e-4, atol=1e-6)


def test_pairwise_of_identical_sets_has_near_minimal_diagonal():
    # |x|^2 + |y|^2 - 2 x.y cancels at x == y; float32 rounding leaves an absolute error of
    # order sqrt(ulp(|x|^2)) / sqrt(D), far below one environment step (-log 0.995 = 5e-3).
    x = jax.random.normal(jax.random.PRNGKey(7), (64, 16))
    d = mrn_pairwise(x, x, num_components=2)
    np.testing.assert_allclose(jnp.diagonal(d), math.sqrt(EPS) / 4.0, atol=1e-4)


@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_pairwise_keeps_short_distances_under_a_common_offset(offset):
    # MRN distances do not change when both sets move together, so neither may the fused form's. About
    # the origin, |x|^2 + |y|^2 - 2 x.y loses ~offset^2 * 1e-7 per pair to float32 cancellation: at an
    # offset of 1000 a 10-step distance came out anywhere in 0-20 steps.
    x = 10.0 * jax.random.normal(jax.random.PRNGKey(8), (128, 512)) + offset
    y = x + 0.15 * jax.random.normal(jax.random.PRNGKey(9), (128, 512))
    step = -math.log(0.995)
    np.testing.assert_allclose(mrn_pairwise(x, y) / step, mrn_pairwise_naive(x, y) / step, atol=0.02)
    fused, naive = (jax.grad(lambda a, b, fn=fn: jnp.sum(jnp.diagonal(fn(a, b))), argnums=(0, 1))(x, y)
                    for fn in (mrn_pairwise, mrn_pairwise_naive))
    # the symmetric halves' (each component's last 32 coordinates): the offset's rounding makes ties in
    # the asymmetric max, whose gradient naive splits and fused gives to one coordinate
    for f, n in zip(fused, naive, strict=True):
        np.testing.assert_allclose(f.reshape(128, 8, 64)[..., 32:], n.reshape(128, 8, 64)[..., 32:], rtol=1e-2,
                                   atol=1e-5)
