"""Encoders: convolutions as slices and one matmul compute what XLA's convolution op computes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqe_model.networks.encoders import conv_as_matmul, make_encoder, twin_encoder
from mqe_model.networks.mqe import Actor


@settings(max_examples=12, deadline=None)
@given(batch=st.integers(1, 2), height=st.integers(1, 9), width=st.integers(1, 9), channels=st.integers(1, 4),
       features=st.integers(1, 5), kernel=st.sampled_from([(1, 1), (3, 3), (1, 3), (5, 5), (7, 7)]),
       strides=st.sampled_from([(1, 1), (2, 2), (1, 2), (3, 3)]),
       padding=st.sampled_from(["SAME", "VALID", ((1, 0), (0, 2))]), seed=st.integers(0, 2**16))
def test_conv_as_matmul_equals_xlas_convolution(batch, height, width, channels, features, kernel, strides,
                                                padding, seed):
    lhs_key, rhs_key = jax.random.split(jax.random.PRNGKey(seed))
    lhs = jax.random.normal(lhs_key, (batch, height, width, channels))
    rhs = jax.random.normal(rhs_key, (*kernel, channels, features))
    numbers = jax.lax.conv_dimension_numbers(lhs.shape, rhs.shape, ("NHWC", "HWIO", "NHWC"))
    want = jax.lax.conv_general_dilated(lhs, rhs, strides, padding, dimension_numbers=numbers,
                                        precision=jax.lax.Precision.HIGHEST)
    got = conv_as_matmul(lhs, rhs, strides, padding, dimension_numbers=numbers, precision=jax.lax.Precision.HIGHEST)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dilated_grouped_or_other_layout_convolutions_are_refused():
    lhs, rhs = jnp.ones((1, 5, 5, 2)), jnp.ones((3, 3, 2, 2))
    with pytest.raises(ValueError, match="undilated, ungrouped convolutions only"):
        conv_as_matmul(lhs, rhs, (1, 1), "SAME", rhs_dilation=(2, 2))
    with pytest.raises(ValueError, match="undilated, ungrouped convolutions only"):
        conv_as_matmul(lhs, rhs[:, :, :1], (1, 1), "SAME", feature_group_count=2)
    with pytest.raises(ValueError, match="NHWC inputs and HWIO filters"):
        conv_as_matmul(lhs, rhs, (1, 1), "SAME", dimension_numbers=("NHWC", "OIHW", "NHWC"))


@pytest.mark.parametrize("name, tolerance", [("resnet_tiny", 1e-5), ("impala_tiny", 1e-5), ("resnet_tiny_bf16", 2e-2)])
def test_a_matmul_encoder_has_the_same_weights_and_features_and_no_convolution_op(name, tolerance):
    xla, matmul = make_encoder(name), make_encoder(f"{name}:matmul")
    images = jax.random.randint(jax.random.PRNGKey(0), (2, 32, 32, 3), 0, 256).astype(jnp.uint8)
    params = xla.init(jax.random.PRNGKey(1), images)
    same_init = matmul.init(jax.random.PRNGKey(1), images)
    assert jax.tree_util.tree_structure(same_init) == jax.tree_util.tree_structure(params)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(same_init),
                                                   jax.tree_util.tree_leaves(params), strict=True))
    np.testing.assert_allclose(matmul.apply(params, images), xla.apply(params, images), rtol=tolerance, atol=tolerance)
    assert "convolution(" in jax.jit(xla.apply).lower(params, images).as_text()
    assert "convolution(" not in jax.jit(matmul.apply).lower(params, images).as_text()


def test_the_twin_of_a_matmul_resnet_keeps_its_convolutions_as_matmuls():
    assert twin_encoder(make_encoder("resnet_tiny:matmul")).conv == "matmul"
    assert twin_encoder(make_encoder("resnet_tiny")).conv == "xla"


@pytest.mark.parametrize("name, match", [
    ("resnet_tiny:fft", r"the only suffix is ':matmul' .*e\.g\. 'resnet_tiny:matmul'"),
    ("resnet99:matmul", "unknown encoder 'resnet99'"),
])
def test_bad_encoder_names_say_what_exists(name, match):
    with pytest.raises(ValueError, match=match):
        make_encoder(name)


def test_a_matmul_encoder_built_inside_the_actor_binds_to_it():
    # The Actor builds its encoder in a compact method: the ':matmul' lowering must reach that module.
    actor = Actor("impala_tiny:matmul", (8,), 2)
    images = jnp.zeros((2, 16, 16, 3), jnp.uint8)
    params = actor.init(jax.random.PRNGKey(0), images, images)
    assert actor.apply(params, images, images).shape == (2, 2)
    assert "convolution(" not in jax.jit(actor.apply).lower(params, images, images).as_text()
