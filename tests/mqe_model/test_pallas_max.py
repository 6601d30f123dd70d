"""The tiled Pallas maximum (interpreted on the CPU) against XLA's running maximum: values, ties,
arg-max, gradients, and the whole MQE update."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mqe_model import pallas_max, quasimetric
from mqe_model.agents import mqe


def reference(x, y):
    """quasimetric's XLA maximum, (N, B, K), (N, F, K) -> (N, B, F) (it lays components second)."""
    return quasimetric._max_and_argmax(jnp.moveaxis(x, 0, 1), jnp.moveaxis(y, 0, 1))


def test_forward_equals_the_running_maximum_with_the_first_arg_max_on_ties():
    rng = np.random.default_rng(0)
    # small integers: many pairs reach their maximum at several k, so the tie rule is exercised
    x = jnp.asarray(rng.integers(-2, 3, (3, 16, 8)).astype(np.float32))
    y = jnp.asarray(rng.integers(-2, 3, (3, 32, 8)).astype(np.float32))
    best, arg = pallas_max.max_and_argmax(x, y)
    ref_best, ref_arg = reference(x, y)
    np.testing.assert_array_equal(best, ref_best)
    np.testing.assert_array_equal(arg, ref_arg)
    assert arg.dtype == jnp.int8 and best.shape == (3, 16, 32)


def test_gradients_reach_the_arg_max_coordinates_as_xlas():
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(2, 32, 4)).astype(np.float32))
    y = jnp.asarray(rng.normal(size=(2, 16, 4)).astype(np.float32))
    weights = jnp.asarray(rng.normal(size=(2, 32, 16)).astype(np.float32))
    ours = jax.grad(lambda a, b: jnp.sum(weights * pallas_max.pairwise_max_diff(a, b)), (0, 1))(x, y)
    xla = jax.grad(lambda a, b: jnp.sum(
        weights * quasimetric._pairwise_max_diff(jnp.moveaxis(a, 0, 1), jnp.moveaxis(b, 0, 1))), (0, 1))(x, y)
    for got, want in zip(ours, xla, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_supported_shapes_are_powers_of_two_tiles():
    assert pallas_max.supported(256, 256, 32) and pallas_max.supported(8, 16, 4)
    assert not pallas_max.supported(7, 16, 4) and not pallas_max.supported(16, 16, 3)
    assert not pallas_max.supported(4, 16, 4)  # below the smallest tile
    assert not pallas_max.supported(1024, 16, 4)  # a block of rows across 1024 columns: too wide


@pytest.mark.parametrize("rows, cols", [(16, 32), (7, 5)])  # tiled, and the fallback to XLA's maximum
def test_pallas_pairwise_equals_fused(rows, cols):
    x = jax.random.normal(jax.random.PRNGKey(2), (2, rows, 64))
    y = jax.random.normal(jax.random.PRNGKey(3), (2, cols, 64))
    np.testing.assert_allclose(quasimetric.mrn_pairwise_pallas(x, y, num_components=8),
                               quasimetric.mrn_pairwise(x, y, num_components=8), rtol=1e-6, atol=1e-6)


def test_an_mqe_update_of_two_vmapped_seeds_equals_the_fused_one():
    fused = dataclasses.replace(mqe.get_config("tiny"), batch_size=16)
    pallas = dataclasses.replace(fused, pairwise="pallas")
    rng = np.random.default_rng(4)
    batch = {"observations": rng.normal(size=(2, 16, 3)), "actions": rng.uniform(-1, 1, (2, 16, 2)),
             "waypoints": rng.normal(size=(2, 16, 3)), "waypoint_offsets": rng.integers(1, 5, (2, 16)),
             "goals": rng.normal(size=(2, 16, 3)), "actor_goals": rng.normal(size=(2, 16, 3))}
    batch = {k: jnp.asarray(v, jnp.int32 if k == "waypoint_offsets" else jnp.float32) for k, v in batch.items()}
    example = {k: v[0] for k, v in batch.items()}
    agents = {c.pairwise: mqe.create_seeds([0, 1], example, c) for c in (fused, pallas)}
    results = {name: mqe.update_many_seeds(agent, {k: v[None] for k, v in batch.items()})
               for name, agent in agents.items()}
    for got, want in zip(jax.tree_util.tree_leaves(results["pallas"][0].params),
                         jax.tree_util.tree_leaves(results["fused"][0].params), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results["pallas"][1]["critic/loss"], results["fused"][1]["critic/loss"], rtol=1e-6)
