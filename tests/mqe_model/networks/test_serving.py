"""Serving layouts: an image MQE policy's two encoders merged into one network, stacked or twinned."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from mqe_model.agents import mqe
from mqe_model.networks import serving


def test_serving_layout_stacks_the_two_encoders_once():
    config = dataclasses.replace(mqe.get_config("tiny"), encoder="impala_tiny")
    obs = np.zeros((2, 16, 16, 3), np.uint8)
    params = mqe.Agent.create(0, {"observations": obs, "actions": np.zeros((2, 4), np.float32)}, config).params
    served = serving.stack_encoders(params, config.encoder)
    assert set(served) == {"actor", "critic", serving.STACKED_ENCODERS}
    assert "encoder" not in served["critic"] and not any("Encoder" in k for k in served["actor"])
    critic_kernel = jax.tree_util.tree_leaves(params["critic"]["encoder"])[0]
    assert jax.tree_util.tree_leaves(served[serving.STACKED_ENCODERS])[0].shape == (2, *critic_kernel.shape)
    with pytest.raises(ValueError, match="no image encoder"):
        serving.stack_encoders(params, None)
    with pytest.raises(ValueError, match="only ResNet encoders have a twin, not ImpalaEncoder"):
        serving.stack_encoders(params, config.encoder, twin=True)



def test_twin_encoder_is_the_two_resnets_side_by_side():
    """One ResNet of twice the width: the stem's filters side by side, every later filter block-diagonal
    with exact zeros off the diagonal, GroupNorm's groups doubled so each holds one encoder's channels;
    its features are the actor encoder's, then the critic encoder's."""
    from flax import traverse_util

    from mqe_model.networks.encoders import make_encoder, twin_encoder

    config = dataclasses.replace(mqe.get_config("tiny"), encoder="resnet_tiny")
    rng = np.random.default_rng(4)
    obs = rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
    params = mqe.Agent.create(0, {"observations": obs, "actions": np.zeros((3, 4), np.float32)}, config).params
    # away from the initialisation, whose zero GroupNorm scales would hide a misplaced block
    leaves, tree = jax.tree_util.tree_flatten(params)
    params = jax.tree_util.tree_unflatten(tree, [leaf + 0.1 * rng.standard_normal(leaf.shape).astype(leaf.dtype)
                                                 for leaf in leaves])
    served = serving.stack_encoders(params, config.encoder, twin=True)
    assert set(served) == {"actor", "critic", serving.TWIN_ENCODER}
    actor_encoder, critic_encoder = params["actor"]["ResNetEncoder_0"], params["critic"]["encoder"]
    flat = traverse_util.flatten_dict(served[serving.TWIN_ENCODER])
    stem = flat[("Conv_0", "kernel")]
    np.testing.assert_array_equal(stem, np.concatenate([actor_encoder["Conv_0"]["kernel"],
                                                        critic_encoder["Conv_0"]["kernel"]], axis=-1))
    block = flat[("ResNetBasicBlock_0", "Conv_0", "kernel")]
    a, c = (e["ResNetBasicBlock_0"]["Conv_0"]["kernel"] for e in (actor_encoder, critic_encoder))
    (cin, cout) = a.shape[-2:]
    np.testing.assert_array_equal(block[..., :cin, :cout], a)
    np.testing.assert_array_equal(block[..., cin:, cout:], c)
    assert not np.any(block[..., :cin, cout:]) and not np.any(block[..., cin:, :cout])
    encoder = twin_encoder(make_encoder("resnet_tiny"))
    features = encoder.apply({"params": served[serving.TWIN_ENCODER]}, obs)
    separate = [make_encoder("resnet_tiny").apply({"params": p}, obs) for p in (actor_encoder, critic_encoder)]
    np.testing.assert_allclose(features, np.concatenate(separate, axis=-1), rtol=1e-5, atol=1e-5)
    for got, want in zip(serving.encode_stacked(served, obs, config.encoder), separate, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
