"""Image augmentation on the device, inside the jitted update.

- "shift": OGBench's pixel agents' random shift: pad 4 px by edge replication, crop back at a random
  offset.
- "bridge": BridgeData V2's augmentation: random resized crop (area 0.8-1.0, aspect 0.9-1.1),
  then brightness (+-0.2), contrast (0.8-1.2), saturation (0.8-1.2) and hue (+-0.1 turn) jitter,
  each as in `tf.image`, except the hue shift, done as a rotation of the YIQ chroma plane (cheap on
  the device and close to the HSV shift).
Each sample draws one transform and applies it to all its image fields (observation, goal,
waypoint...), so goal and observation stay aligned, as both references do.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

AUGMENTATIONS = ("none", "shift", "bridge")
DEFAULT_PROB = {"none": 0.0, "shift": 0.5, "bridge": 1.0}  # OGBench p_aug; Bridge always augments


def _shift_one(key: jax.Array, image: jax.Array, pad: int) -> jax.Array:
    h, w, _ = image.shape
    padded = jnp.pad(image, ((pad, pad), (pad, pad), (0, 0)), mode="edge")
    dy, dx = jax.random.randint(key, (2,), 0, 2 * pad + 1)
    return jax.lax.dynamic_slice(padded, (dy, dx, 0), (h, w, image.shape[-1]))


def _rgb_to_gray(x: jax.Array) -> jax.Array:
    return jnp.sum(x * jnp.array([0.299, 0.587, 0.114]), axis=-1, keepdims=True)


def _bridge_one(key: jax.Array, image: jax.Array) -> jax.Array:
    h, w, _ = image.shape
    k_area, k_ratio, k_pos, k_b, k_c, k_s, k_h = jax.random.split(key, 7)
    area = jax.random.uniform(k_area, (), minval=0.8, maxval=1.0)
    log_ratio = jax.random.uniform(k_ratio, (), minval=jnp.log(0.9), maxval=jnp.log(1.1))
    ratio = jnp.exp(log_ratio)
    crop_h = jnp.clip(jnp.sqrt(area / ratio), 0.0, 1.0) * h
    crop_w = jnp.clip(jnp.sqrt(area * ratio), 0.0, 1.0) * w
    top, left = jax.random.uniform(k_pos, (2,)) * jnp.array([h - crop_h, w - crop_w])
    x = image.astype(jnp.float32) / 255.0
    # Map the crop box onto the full frame: output = input * scale + translation.
    scale = jnp.array([h / crop_h, w / crop_w])
    x = jax.image.scale_and_translate(
        x, (h, w, 3), (0, 1), scale, -jnp.array([top, left]) * scale, method="linear",
        antialias=False,
    )
    x = x + jax.random.uniform(k_b, (), minval=-0.2, maxval=0.2)
    mean = jnp.mean(x)
    x = (x - mean) * jax.random.uniform(k_c, (), minval=0.8, maxval=1.2) + mean
    gray = _rgb_to_gray(x)
    x = (x - gray) * jax.random.uniform(k_s, (), minval=0.8, maxval=1.2) + gray
    angle = 2 * jnp.pi * jax.random.uniform(k_h, (), minval=-0.1, maxval=0.1)
    to_yiq = jnp.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
    cos, sin = jnp.cos(angle), jnp.sin(angle)
    rotate = jnp.array([[1.0, 0.0, 0.0], [0.0, cos, -sin], [0.0, sin, cos]])
    hue = jnp.linalg.inv(to_yiq) @ rotate @ to_yiq
    x = x @ hue.T
    return jnp.clip(jnp.round(x * 255.0), 0, 255).astype(jnp.uint8)


def augment_batch(
    key: jax.Array,
    batch: dict[str, jax.Array],
    image_keys: Sequence[str],
    kind: str,
    prob: float,
) -> dict[str, jax.Array]:
    """`batch` with its uint8 image fields augmented; each sample augmented with probability `prob`."""
    if kind == "none" or prob <= 0:
        return batch
    if kind not in AUGMENTATIONS:
        raise ValueError(f"unknown augmentation {kind!r}; choose one of {AUGMENTATIONS}")
    present = [k for k in image_keys if k in batch]
    if not present:
        return batch
    batch_size = batch[present[0]].shape[0]
    k_apply, k_each = jax.random.split(key)
    sample_keys = jax.random.split(k_each, batch_size)
    apply = jax.random.uniform(k_apply, (batch_size,)) < prob
    one = (lambda k, im: _shift_one(k, im, 4)) if kind == "shift" else _bridge_one
    out = dict(batch)
    for name in present:
        augmented = jax.vmap(one)(sample_keys, batch[name])
        out[name] = jnp.where(apply[:, None, None, None], augmented, batch[name])
    return out
