"""On-device augmentation: dtypes kept, one transform per sample across fields, shifts are shifts."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from mqe_model.data.augment import augment_batch


def _batch():
    images = np.random.default_rng(0).integers(0, 256, size=(6, 24, 24, 3), dtype=np.uint8)
    return {"observations": images, "goals": images.copy(), "actions": np.zeros((6, 2), np.float32)}


@pytest.mark.parametrize("kind", ["shift", "bridge"])
def test_same_transform_for_every_image_field(kind):
    out = augment_batch(jax.random.PRNGKey(0), _batch(), ("observations", "goals"), kind, 1.0)
    assert out["observations"].dtype == np.uint8 and out["observations"].shape == (6, 24, 24, 3)
    np.testing.assert_array_equal(out["observations"], out["goals"])
    assert not np.array_equal(out["observations"], _batch()["observations"])
    np.testing.assert_array_equal(out["actions"], _batch()["actions"])


def test_probability_zero_and_none_are_identity():
    batch = _batch()
    for kind, prob in (("shift", 0.0), ("none", 1.0)):
        out = augment_batch(jax.random.PRNGKey(0), batch, ("observations",), kind, prob)
        np.testing.assert_array_equal(out["observations"], batch["observations"])


def test_shift_is_a_translation_of_the_edge_padded_image():
    batch = _batch()
    out = np.asarray(augment_batch(jax.random.PRNGKey(3), batch, ("observations",), "shift", 1.0)["observations"])
    for original, shifted in zip(batch["observations"], out, strict=True):
        padded = np.pad(original, ((4, 4), (4, 4), (0, 0)), mode="edge")
        found = any(np.array_equal(padded[dy : dy + 24, dx : dx + 24], shifted)
                    for dy in range(9) for dx in range(9))
        assert found


def test_bridge_keeps_the_picture_recognisable():
    smooth = np.linspace(0, 255, 24 * 24 * 3).reshape(1, 24, 24, 3).astype(np.uint8)
    out = augment_batch(jax.random.PRNGKey(1), {"observations": smooth}, ("observations",), "bridge", 1.0)
    a, b = smooth.astype(float).ravel(), np.asarray(out["observations"], float).ravel()
    assert np.corrcoef(a, b)[0, 1] > 0.8
