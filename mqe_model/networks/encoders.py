"""Image encoders: impala-small (OGBench pixel tasks) and the BridgeData ResNet-34 variant.

Every encoder takes uint8 images (..., H, W, C) and returns a flat feature vector; the conversion to
float happens here, on the device, so datasets and requests keep images as uint8.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import traverse_util

from mqe_model.networks.mlp import MLP

CONV_LOWERINGS = ("xla", "matmul")  # how an encoder computes its convolutions; make_encoder's ':matmul' suffix


def window_taps(padded: jax.Array, window: tuple[int, int], strides: tuple[int, int],
                out_hw: tuple[int, int]) -> list[jax.Array]:
    """The element at each window offset (row-major) of every output position, each (N, oh, ow, C):
    the strided slices of the padded NHWC input that a convolution's filter taps read."""
    (wh, ww), (sh, sw), (oh, ow) = window, strides, out_hw
    return [padded[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
            for i in range(wh) for j in range(ww)]


def conv_as_matmul(lhs: jax.Array, rhs: jax.Array, window_strides: Sequence[int], padding: Any,
                   lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                   dimension_numbers: Any = None, feature_group_count: int = 1, precision: Any = None,
                   **unused: Any) -> jax.Array:
    """`lax.conv_general_dilated` for the NHWC / HWIO convolutions the encoders run, as strided slices of
    the padded input (one per filter tap) concatenated along the channels and one matmul with the filter
    reshaped to (taps x in, out). Same numbers to rounding, and no convolution op: on a GPU XLA runs
    convolutions through cuDNN, which its CUDA graphs may leave out, while slices and matmuls they take
    (issue 6). `nn.Conv(conv_general_dilated=conv_as_matmul)` calls it as flax calls XLA's."""
    if any(d != 1 for d in (*(lhs_dilation or ()), *(rhs_dilation or ()))) or feature_group_count != 1:
        raise ValueError("conv_as_matmul computes undilated, ungrouped convolutions only")
    taps_h, taps_w, channels, features = rhs.shape
    if lhs.ndim != 4 or lhs.shape[-1] != channels:
        raise ValueError(f"conv_as_matmul takes NHWC inputs with {channels} channels, got shape {lhs.shape}")
    nhwc = jax.lax.conv_dimension_numbers(lhs.shape, rhs.shape, ("NHWC", "HWIO", "NHWC"))
    if dimension_numbers is not None and \
            jax.lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers) != nhwc:
        raise ValueError(f"conv_as_matmul takes NHWC inputs and HWIO filters, not {dimension_numbers}")
    (stride_h, stride_w), (height, width) = window_strides, lhs.shape[1:3]
    pads = jax.lax.padtype_to_pads((height, width), (taps_h, taps_w), window_strides, padding) \
        if isinstance(padding, str) else padding
    x = jnp.pad(lhs, ((0, 0), tuple(pads[0]), tuple(pads[1]), (0, 0)))
    out_h = max(0, (x.shape[1] - taps_h) // stride_h + 1)
    out_w = max(0, (x.shape[2] - taps_w) // stride_w + 1)
    if out_h == 0 or out_w == 0:  # the filter fits nowhere: an empty image, as XLA's
        return jnp.zeros((lhs.shape[0], out_h, out_w, features), jnp.result_type(lhs, rhs))
    taps = window_taps(x, (taps_h, taps_w), (stride_h, stride_w), (out_h, out_w))
    patches = taps[0] if len(taps) == 1 else jnp.concatenate(taps, axis=-1)  # (tap, channel) order, as HWIO
    return jnp.dot(patches, rhs.reshape(taps_h * taps_w * channels, features), precision=precision)


def _conv_function(conv: str) -> Any:
    """`nn.Conv`'s `conv_general_dilated` for an encoder's `conv` field (None: XLA's convolution)."""
    if conv not in CONV_LOWERINGS:
        raise ValueError(f"conv={conv!r}: choose one of {', '.join(CONV_LOWERINGS)}")
    return conv_as_matmul if conv == "matmul" else None


def _flatten_batch(images: jax.Array) -> tuple[jax.Array, tuple[int, ...]]:
    lead = images.shape[:-3]
    return images.reshape(-1, *images.shape[-3:]), lead


class ImpalaResidualBlock(nn.Module):
    """ReLU -> conv -> ReLU -> conv, plus the input."""

    channels: int  # convolution channels
    conv: str = "xla"  # how convolutions are computed: 'xla' (its convolution op) or 'matmul' (conv_as_matmul)
    dtype: jnp.dtype = jnp.float32  # dtype of the convolutions and of the activations between them

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        conv = _conv_function(self.conv)
        h = nn.Conv(self.channels, (3, 3), dtype=self.dtype, conv_general_dilated=conv)(nn.relu(x))
        h = nn.Conv(self.channels, (3, 3), dtype=self.dtype, conv_general_dilated=conv)(nn.relu(h))
        return x + h


class ImpalaEncoder(nn.Module):
    """IMPALA convolutional stack (OGBench's `impala_small` has one residual block per stack)."""

    stack_sizes: Sequence[int] = (16, 32, 32)  # channels of each conv stack
    num_blocks: int = 1  # residual blocks per stack
    mlp_dims: Sequence[int] = (512,)  # widths of the MLP after the convolutions
    layer_norm: bool = True  # LayerNorm on the conv output and in the MLP
    conv: str = "xla"  # how convolutions are computed: 'xla' (its convolution op) or 'matmul' (conv_as_matmul)
    compute_dtype: jnp.dtype = jnp.float32  # dtype of the convolution stack (bfloat16 on GPUs); the MLP is float32

    @nn.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        x, lead = _flatten_batch(images)
        x = (x.astype(jnp.float32) / 255.0).astype(self.compute_dtype)
        for channels in self.stack_sizes:
            x = nn.Conv(channels, (3, 3), dtype=self.compute_dtype, conv_general_dilated=_conv_function(self.conv))(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            for _ in range(self.num_blocks):
                x = ImpalaResidualBlock(channels, self.conv, self.compute_dtype)(x)
        x = nn.relu(x.astype(jnp.float32))
        if self.layer_norm:
            x = nn.LayerNorm()(x)
        x = x.reshape(x.shape[0], -1)
        x = MLP(self.mlp_dims[:-1], self.mlp_dims[-1], self.layer_norm, activate_final=True)(x)
        return x.reshape(*lead, -1)


class ResNetBasicBlock(nn.Module):
    """Two 3x3 convolutions with GroupNorm and a projection shortcut when the shape changes."""

    channels: int  # output channels
    strides: int = 1  # stride of the first convolution
    norm_groups: int = 4  # GroupNorm groups
    dtype: jnp.dtype = jnp.float32  # computation dtype
    conv: str = "xla"  # how convolutions are computed: 'xla' (its convolution op) or 'matmul' (conv_as_matmul)

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        lowering = _conv_function(self.conv)

        def conv(channels: int, kernel: tuple[int, int], stride: int) -> nn.Conv:
            return nn.Conv(channels, kernel, (stride, stride), use_bias=False, dtype=self.dtype,
                           conv_general_dilated=lowering)

        h = conv(self.channels, (3, 3), self.strides)(x)
        h = nn.relu(nn.GroupNorm(self.norm_groups, dtype=self.dtype)(h))
        h = conv(self.channels, (3, 3), 1)(h)
        h = nn.GroupNorm(self.norm_groups, scale_init=nn.initializers.zeros, dtype=self.dtype)(h)
        if x.shape != h.shape:
            x = conv(self.channels, (1, 1), self.strides)(x)
            x = nn.GroupNorm(self.norm_groups, dtype=self.dtype)(x)
        return nn.relu(x + h)


class ResNetEncoder(nn.Module):
    """ResNet-v1 with GroupNorm, as BridgeData V2's `resnetv1-34-bridge` (stages 3, 4, 6, 3).

    Images are scaled to [-1, 1]. With `early_fusion`, the observation and the goal are stacked
    channel-wise before the first convolution (GCBC and GCIQL in BridgeData V2 do this).
    """

    stage_sizes: Sequence[int] = (3, 4, 6, 3)  # basic blocks per stage
    width: int = 64  # channels of the first stage, doubled at each later stage
    norm_groups: int = 4  # GroupNorm groups
    compute_dtype: jnp.dtype = jnp.float32  # dtype of the convolutions (bfloat16 on GPUs)
    conv: str = "xla"  # how convolutions are computed: 'xla' (its convolution op) or 'matmul' (conv_as_matmul)

    @nn.compact
    def __call__(self, images: jax.Array, goals: jax.Array | None = None) -> jax.Array:
        if goals is not None:
            images = jnp.concatenate([images, goals], axis=-1)
        x, lead = _flatten_batch(images)
        x = (x.astype(jnp.float32) / 127.5 - 1.0).astype(self.compute_dtype)
        x = nn.Conv(self.width, (7, 7), (2, 2), use_bias=False, dtype=self.compute_dtype,
                    conv_general_dilated=_conv_function(self.conv))(x)
        x = nn.relu(nn.GroupNorm(self.norm_groups, dtype=self.compute_dtype)(x))
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
        for stage, blocks in enumerate(self.stage_sizes):
            for block in range(blocks):
                strides = 2 if stage > 0 and block == 0 else 1
                x = ResNetBasicBlock(
                    self.width * 2**stage, strides, self.norm_groups, self.compute_dtype, self.conv
                )(x)
        x = jnp.mean(x.astype(jnp.float32), axis=(1, 2))
        return x.reshape(*lead, -1)


def twin_encoder(encoder: nn.Module) -> ResNetEncoder:
    """The ResNet that computes two `encoder`s of the same input side by side: twice the channels and
    GroupNorm groups, so each group holds the same channels of one of the two. With `twin_params` it
    returns both encoders' features, concatenated; every layer is one ordinary convolution where
    `jax.vmap` over two encoders makes a grouped one (on a GPU, cuDNN slices its input per group)."""
    if not isinstance(encoder, ResNetEncoder):
        raise ValueError(f"only ResNet encoders have a twin, not {type(encoder).__name__}: their "
                         "normalisation mixes channels")
    return encoder.clone(width=2 * encoder.width, norm_groups=2 * encoder.norm_groups)


def twin_params(first: Any, second: Any) -> Any:
    """`twin_encoder` weights from two ResNet encoders' weights: the stem's filters side by side (both read
    the image), every later filter block-diagonal (exact zeros between the two), GroupNorm scales and
    biases concatenated. Its features are `first`'s, then `second`'s."""
    flat_first, flat_second = traverse_util.flatten_dict(first), traverse_util.flatten_dict(second)

    def merge(path: tuple[str, ...], a: jax.Array) -> jax.Array:
        b = flat_second[path]
        if path[-1] != "kernel" or path == ("Conv_0", "kernel"):
            return jnp.concatenate([a, b], axis=-1)
        (cin, cout), (cin_b, cout_b) = a.shape[-2:], b.shape[-2:]
        block = jnp.zeros((*a.shape[:-2], cin + cin_b, cout + cout_b), a.dtype)
        return block.at[..., :cin, :cout].set(a).at[..., cin:, cout:].set(b)

    return traverse_util.unflatten_dict({path: merge(path, leaf) for path, leaf in flat_first.items()})


def with_kernels_in_compute_dtype(params: Any, name: str | None) -> Any:
    """`params` (any agent's tree) with every convolution kernel in the compute dtype of the encoder
    `name`, as flax's `nn.Conv(dtype=...)` casts it on each call: the same numbers, cast once. A server
    does this at load; otherwise each act converts every filter of a bf16 ResNet-34 again (on an H200,
    46 of the act's 429 kernel launches, `docs/performance.md`). Unchanged for float32 encoders."""
    encoder = make_encoder(name)
    dtype = getattr(encoder, "compute_dtype", jnp.float32)
    if dtype == jnp.float32:
        return params

    def cast(path: tuple[str, ...], leaf: Any) -> Any:
        is_conv_kernel = len(path) >= 2 and path[-1] == "kernel" and path[-2].startswith("Conv_")
        return leaf.astype(dtype) if is_conv_kernel else leaf

    return traverse_util.path_aware_map(cast, params)


def make_encoder(name: str | None) -> nn.Module | None:
    """Encoder by preset name: None (state input), 'impala_small', 'impala_small_bf16', 'resnet34', 'resnet34_bf16', 'resnet_tiny',
    'resnet_tiny_bf16' (the bf16 path at test size). A ':matmul' suffix ('resnet34_bf16:matmul') computes
    the same encoder's convolutions with `conv_as_matmul`: same weights, same numbers to rounding."""
    if name is None:
        return None
    base, suffix, lowering = name.partition(":")
    if suffix and lowering != "matmul":
        raise ValueError(f"encoder '{name}': the only suffix is ':matmul' (convolutions as matmuls), "
                         f"e.g. '{base}:matmul'")
    # One constructor call with the lowering: a module built inside a compact method (the Actor's
    # encoder) binds to it there, where a clone of it would not.
    encoders = {
        "impala_small": (ImpalaEncoder, dict(num_blocks=1)),
        "impala_small_bf16": (ImpalaEncoder, dict(num_blocks=1, compute_dtype=jnp.bfloat16)),
        "impala_tiny": (ImpalaEncoder, dict(stack_sizes=(8, 8), num_blocks=1, mlp_dims=(32,))),
        "resnet34": (ResNetEncoder, {}),
        "resnet34_bf16": (ResNetEncoder, dict(compute_dtype=jnp.bfloat16)),
        "resnet_tiny": (ResNetEncoder, dict(stage_sizes=(1, 1), width=8, norm_groups=4)),
        "resnet_tiny_bf16": (ResNetEncoder, dict(stage_sizes=(1, 1), width=8, norm_groups=4,
                                                 compute_dtype=jnp.bfloat16)),
    }
    if base not in encoders:
        raise ValueError(f"unknown encoder '{base}'; choose one of {sorted(encoders)} or None")
    module, fields = encoders[base]
    return module(**fields, conv=lowering or "xla")
