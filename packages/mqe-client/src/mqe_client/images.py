"""The image resize shared by training, the server, the robot client and the twin.

Imports only numpy (and OpenCV when installed) so the robot client can use the exact function the
policy was trained with. `resize == "area"` is OpenCV's INTER_AREA; without OpenCV a pure-numpy
area average gives the same result for integer scale factors and a close one otherwise.
"""

from __future__ import annotations

import numpy as np

RESIZE_METHODS = ("area",)


def _area_resize_numpy(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Area-weighted average over the source pixels each target pixel covers (like INTER_AREA)."""

    def weights(src: int, dst: int) -> np.ndarray:
        # w[i, j] = overlap of target pixel i with source pixel j, in source pixels, rows sum to 1.
        edges = np.arange(dst + 1) * (src / dst)
        lo, hi = edges[:-1, None], edges[1:, None]
        j = np.arange(src)[None, :]
        overlap = np.clip(np.minimum(hi, j + 1) - np.maximum(lo, j), 0.0, None)
        return overlap / overlap.sum(axis=1, keepdims=True)

    rows = weights(image.shape[0], height)
    cols = weights(image.shape[1], width)
    out = np.tensordot(rows, image.astype(np.float64), axes=(1, 0))  # (height, W, C)
    out = np.tensordot(out, cols, axes=(1, 1)).transpose(0, 2, 1)  # (height, width, C)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def preprocess_image(
    image: np.ndarray, height: int, width: int, method: str = "area"
) -> np.ndarray:
    """An RGB uint8 (H, W, 3) image resized to (height, width, 3) uint8 with `method`."""
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[-1] != 3:
        raise ValueError(
            f"expected an RGB uint8 image (H, W, 3), got {image.dtype} {image.shape}"
        )
    if method not in RESIZE_METHODS:
        raise ValueError(f"unknown resize method {method!r}; choose one of {RESIZE_METHODS}")
    if image.shape[:2] == (height, width):
        return image
    try:
        import cv2
    except ImportError:
        return _area_resize_numpy(image, height, width)
    return cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA)


def preprocess_images(
    images: np.ndarray, height: int, width: int, method: str = "area"
) -> np.ndarray:
    """`preprocess_image` over a batch (N, H, W, 3); returns the input itself when already sized."""
    if images.shape[1:3] == (height, width):
        return images
    out = np.empty((len(images), height, width, 3), np.uint8)
    for i, image in enumerate(images):
        out[i] = preprocess_image(image, height, width, method)
    return out
