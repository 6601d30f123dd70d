"""preprocess_image: OpenCV's area resize, a numpy fallback, and no JAX import."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from mqe_client.images import _area_resize_numpy, preprocess_image


def test_integer_factor_matches_block_mean():
    image = np.random.default_rng(0).integers(0, 256, size=(8, 12, 3), dtype=np.uint8)
    out = preprocess_image(image, 4, 6)
    expected = image.reshape(4, 2, 6, 2, 3).astype(float).mean(axis=(1, 3))
    assert out.dtype == np.uint8 and out.shape == (4, 6, 3)
    assert np.abs(out - expected).max() <= 1


def test_numpy_fallback_agrees_with_opencv():
    cv2 = pytest.importorskip("cv2")
    image = np.random.default_rng(1).integers(0, 256, size=(480, 640, 3), dtype=np.uint8)
    ours = _area_resize_numpy(image, 128, 128).astype(int)
    theirs = cv2.resize(image, (128, 128), interpolation=cv2.INTER_AREA).astype(int)
    assert np.abs(ours - theirs).max() <= 2


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="RGB uint8"):
        preprocess_image(np.zeros((4, 4), np.uint8), 2, 2)
    with pytest.raises(ValueError, match="resize method"):
        preprocess_image(np.zeros((4, 4, 3), np.uint8), 2, 2, "bicubic")


def test_module_does_not_import_jax():
    code = "import sys, mqe_client.images; assert 'jax' not in sys.modules, 'jax imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
