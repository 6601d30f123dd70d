"""Image datasets kept on the accelerator: batches carry row indices, the update gathers the frames.

Sampling stays on the host (numpy, explicit generators, the same draws as ever); only what crosses to
the device changes. Host-sampled image batches cost the loop a copy of every frame of every update
(batch 256 at 64 x 64: ~12 MB an update); with the frames uploaded once, a batch is a few KB of
indices and the gather runs on the device, inside the jitted update.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import jax
import numpy as np

from mqe_model.data.dataset import Dataset

# Frames stay on the device when they take at most this share of its memory: the rest is the
# update's (the sim preset's MQE update peaks at a few GiB at batch 256).
DEVICE_SHARE = 0.4
# A device that reports no memory limit (the CPU backend) keeps frames up to this size as a second copy.
UNREPORTED_LIMIT_BYTES = 1 << 30


def fits_on_device(nbytes: int, device: jax.Device) -> bool:
    """Whether `nbytes` of frames may stay on `device` beside the training."""
    stats = device.memory_stats() or {}
    limit = stats.get("bytes_limit")
    return nbytes <= (UNREPORTED_LIMIT_BYTES if limit is None else DEVICE_SHARE * limit)


def index_dataset(dataset: Dataset) -> Dataset:
    """`dataset` with each observation replaced by its row number, (N, 1) int32: every sampler that
    indexes `observations` then draws batches of indices, unchanged otherwise."""
    rows = np.arange(dataset.size, dtype=np.int32)[:, None]
    return dataclasses.replace(dataset, observations=rows)


def gather_images(batch: dict[str, Any], images: Any, keys: Iterable[str]) -> dict[str, Any]:
    """`batch` with each of `keys` present (row indices, (..., 1)) replaced by those rows of `images`;
    numpy or jax arrays alike."""
    out = dict(batch)
    for key in keys:
        if key in out:
            out[key] = images[out[key][..., 0]]
    return out
