"""PolicyRuntime: one checkpoint ready to act, compiled ahead of time for fixed batch buckets.

    runtime = PolicyRuntime.load("runs/mqe/checkpoints")
    goal = runtime.encode_goal(goal_image)          # encoded once (goal codes), reused every step
    action, distance = runtime.act(frame, goal)     # robot units; steps to the goal, or None

Preprocessing (decode, resize with the training-time function) and un-normalization come from the
checkpoint's metadata only. A goal is preprocessed and run through the goal half of the policy
once (the goal codes: for MQE the critic's psi(g) and the actor's goal features), so each step
encodes only the observation. With `encoders` 'stacked' or 'twin' the weights sit on the device in
a merged serving layout (`policy.serving_fns`): an image MQE policy's actor and critic encoders run
as one network, one kernel per layer for both (`benchmarks/act_latency.py` compares the layouts).
Every batch size in `buckets` is compiled and run once at load, so serving never compiles: a batch
of n is padded up to the smallest bucket >= n. The weights are stored in the memory layout that
XLA picks for the smallest bucket's act (`device_layouts`), so no executable re-lays them out per call.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.layout import Format, Layout

from mqe_client.images import preprocess_image
from mqe_client.protocol import ErrorCode, ProtocolError
from mqe_model.policy import (
    ENCODER_ARRANGEMENTS,
    Policy,
    encoder_arrangements,
    load_policy,
    serving_fns,
)
from server.settings import DEFAULT_BUCKETS

logger = logging.getLogger(__name__)

MAX_PIXELS = 4096 * 4096  # larger images get 422 invalid_image: bounds one decode's memory (48 MiB of RGB)
# How image policies serve, by the device's platform: the faster choice measured on each, every one
# giving the same actions to rounding (figures: docs/performance.md, `benchmarks/act_latency.py`).
CPU_ENCODERS = "separate"  # XLA's grouped convolutions make stacked encoders 1.41x (bridge) the separate act on the CPU
ACCELERATOR_ENCODERS = "twin"  # one ResNet twice as wide: as fast as stacked or faster on H200s (0.79-0.96x served)
GPU_CONV = "matmul"  # slices and one matmul each, held whole by CUDA graphs: 0.71x XLA's convolutions served on an H200
OTHER_CONV = "xla"  # XLA's op off GPUs: on the CPU the two measured mixed
HOST_MEMORY = "pinned_host"  # where `host_io` acts take their frames and leave their answers
# Default action names of the WidowX 250 in the Bridge convention, reported
# when a 7-d checkpoint does not record its own.
WIDOWX_ACTION_NAMES = ("dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper")


def layout_request(leaf: Any, sharding: Any) -> Format:
    """What a weight's layout is compiled as with `device_layouts`: left to XLA, whatever the leaf (the
    leaf is there for a test that makes the choice itself on the CPU, where XLA keeps row-major)."""
    return Format(Layout.AUTO, sharding)


def served_arrangement(wanted: str, available: tuple[str, ...]) -> str:
    """The encoder arrangement a policy serves when `wanted` is asked: itself if `available`, else the
    nearest one that is ('twin' -> 'stacked' -> 'separate')."""
    if wanted not in ENCODER_ARRANGEMENTS:
        raise ValueError(f"encoders={wanted!r}: choose one of {list(ENCODER_ARRANGEMENTS)}")
    nearest = ENCODER_ARRANGEMENTS[: ENCODER_ARRANGEMENTS.index(wanted) + 1]
    return next(a for a in reversed(nearest) if a in available)


def encoders_on(platform: str) -> str:
    """The encoder arrangement image MQE policies serve on a device of `platform` ('cpu', 'gpu', ...),
    `PolicyRuntime.load`'s `encoders`: the twin off the CPU, separate encoders on it."""
    return CPU_ENCODERS if platform == "cpu" else ACCELERATOR_ENCODERS


def conv_on(platform: str) -> str:
    """How image policies on a device of `platform` compute their convolutions, `PolicyRuntime.load`'s
    `conv`: matmuls on GPUs, XLA's convolution op elsewhere."""
    return GPU_CONV if platform == "gpu" else OTHER_CONV


def packed(act_fn: Any, device_memory: Any = None) -> Any:
    """`act_fn` answering one (B, A + 1) float32 array, each row the action then the distance: one
    device-to-host copy per act instead of two. With `device_memory` (a sharding) the observations are
    first moved there: they arrive in host memory, and the copy is the compiled act's own."""

    def act(params: Any, observations: jax.Array, codes: jax.Array) -> jax.Array:
        if device_memory is not None:
            observations = jax.device_put(observations, device_memory)
        actions, distances = act_fn(params, observations, codes)
        return jnp.concatenate([actions.astype(jnp.float32), distances.astype(jnp.float32)[:, None]], axis=-1)

    return act


def decode_image_bytes(data: bytes, max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """PNG/JPEG bytes to an RGB uint8 (H, W, 3) array; ProtocolError invalid_image when it cannot."""
    import cv2

    buffer = np.frombuffer(data, np.uint8)
    # Read the header first so that a small file claiming a huge size is refused before decoding.
    try:
        decoded = cv2.imdecode(buffer, cv2.IMREAD_COLOR)
    except cv2.error as e:
        raise ProtocolError(ErrorCode.INVALID_IMAGE, f"image bytes cannot be decoded: {e}") from None
    if decoded is None or decoded.ndim != 3 or decoded.shape[2] != 3 or decoded.size == 0:
        raise ProtocolError(ErrorCode.INVALID_IMAGE, "image bytes are not a PNG or JPEG file OpenCV can decode")
    if decoded.shape[0] * decoded.shape[1] > max_pixels:
        raise ProtocolError(ErrorCode.INVALID_IMAGE,
                            f"image of {decoded.shape[1]}x{decoded.shape[0]} is over {max_pixels} pixels")
    return np.ascontiguousarray(decoded[:, :, ::-1])  # OpenCV decodes BGR


@dataclasses.dataclass
class PolicyRuntime:
    """A loaded policy with its compiled act function per batch bucket."""

    policy: Policy  # weights, config, metadata and the pure act function
    name: str  # the name clients use (`--policy NAME=...`)
    buckets: tuple[int, ...]  # compiled batch sizes, ascending
    device: Any  # the jax device the weights live on and the act function runs on
    checkpoint_dir: Path | None = None  # where it was loaded from, for logs and metadata
    warmup_s: float = 0.0  # compile + first run of every bucket at load
    encoders: str = "separate"  # image MQE: 'separate', or one network: 'stacked' (vmapped) or 'twin' (twice as wide)
    conv: str = "xla"  # image policies' convolutions: XLA's convolution op ('xla') or slices and a matmul each ('matmul')
    device_layouts: bool = True  # weights stored in the memory layout the compiled act asks for (XLA's choice)
    host_io: bool = False  # frames in and answers out through pinned host memory, the copies inside the compiled act
    _compiled: dict[int, Any] = dataclasses.field(default_factory=dict, repr=False)
    _compiled_goal: Any = dataclasses.field(default=None, repr=False)  # goal codes of one goal
    _params: Any = dataclasses.field(default=None, repr=False)  # policy.params in the serving layout
    _goal_fn: Any = dataclasses.field(default=None, repr=False)  # goal codes, over _params
    _act_fn: Any = dataclasses.field(default=None, repr=False)  # act on codes, over _params
    _last_codes: Any = dataclasses.field(default=None, repr=False)  # (host copy, device array) of the last act's goal codes

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(cls, checkpoint_dir: str | Path, buckets: tuple[int, ...] = DEFAULT_BUCKETS,
             device: Any = None, name: str = "default", encoders: str = "separate", device_layouts: bool = True,
             conv: str = "xla", host_io: bool = False) -> PolicyRuntime:
        """Load a checkpoint, compile the act function for every bucket and warm it up.

        `encoders` (`networks.serving.ENCODER_ARRANGEMENTS`) is a wish that each policy meets as far as it can:
        a policy without two image encoders serves them 'separate', and one whose encoder has no twin
        (impala) serves 'twin' as 'stacked'.

        With `device_layouts` the smallest bucket's act is compiled with the weights' memory layout
        left to XLA (`Layout.AUTO`), the weights are put on the device in the layout it chose, and
        every other executable is compiled for that same layout. Row-major weights make XLA
        re-lay out each convolution filter (HWIO to the KRSC order cuDNN reads) on every call: a
        ResNet-34 act ran ~46 such kernels per step, each fused with the filter's bf16 conversion,
        which the serving `prepare` now also does once (`docs/performance.md`).

        `conv` ('xla' or 'matmul', `policy.with_conv`): with 'matmul' an image policy's act holds no
        convolution op, only slices and matmuls, which XLA's CUDA graphs can take whole.

        With `host_io` each act takes its frames from pinned host memory and leaves its answers there:
        the host-to-device and device-to-host copies run inside the compiled act instead of as transfers
        of their own before and after it (the goal codes stay on the device). The same answers."""
        policy = load_policy(checkpoint_dir)
        device = device if device is not None else jax.local_devices()[0]
        arrangement = served_arrangement(encoders, encoder_arrangements(policy.agent_name, policy.config))
        runtime = cls(policy, name, tuple(sorted(set(buckets))), device, Path(checkpoint_dir), encoders=arrangement, device_layouts=device_layouts, conv=conv,
                      host_io=host_io)
        prepare, runtime._goal_fn, runtime._act_fn = serving_fns(policy.agent_name, policy.config,
                                                                 policy.action_stats, arrangement, conv)
        params = prepare(policy.params)
        sharding = jax.sharding.SingleDeviceSharding(device)
        abstract = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), params)
        start = time.perf_counter()
        smallest, *others = runtime.buckets
        # one goal's codes have the same shape at every batch size: traced once, not once per bucket
        one_goal = jax.eval_shape(runtime._goal_fn, abstract, runtime._spec(1))
        requested = jax.tree_util.tree_map(lambda x: layout_request(x, sharding) if device_layouts else sharding,
                                           params)
        runtime._compiled[smallest] = runtime._compile(smallest, abstract, requested, one_goal)
        formats = runtime._compiled[smallest].input_formats[0][0] if device_layouts else requested
        runtime._params = jax.device_put(params, formats)
        runtime._compiled_goal = jax.jit(runtime._goal_fn, in_shardings=(formats, sharding)).lower(
            abstract, runtime._spec(1)).compile()
        for size in others:
            runtime._compiled[size] = runtime._compile(size, abstract, formats, one_goal)
        # One real run each: the first execution also allocates buffers and loads kernels.
        codes = runtime.encode_goal(np.zeros(policy.observation_shape, runtime.observation_dtype),
                                    preprocessed=True)
        for size in runtime.buckets:
            obs = np.zeros((size, *policy.observation_shape), runtime.observation_dtype)
            jax.block_until_ready(runtime._compiled[size](runtime._params, runtime._frames_in(obs),
                                                          np.repeat(codes[None], size, axis=0)))
        runtime.warmup_s = time.perf_counter() - start
        logger.info("policy %s (%s step %d) ready on %s%s%s%s%s: buckets %s compiled and warmed in %.1f s",
                    name, policy.agent_name, policy.step, device,
                    "" if arrangement == "separate" else f", encoders {arrangement}",
                    ", weights in the device's layout" if device_layouts else "",
                    ", convolutions as matmuls" if conv == "matmul" else "",
                    ", frames and answers in pinned host memory" if host_io else "", runtime.buckets, runtime.warmup_s)
        return runtime

    def _spec(self, size: int, sharding: Any = None) -> jax.ShapeDtypeStruct:
        sharding = sharding or jax.sharding.SingleDeviceSharding(self.device)
        return jax.ShapeDtypeStruct((size, *self.policy.observation_shape), self.observation_dtype, sharding=sharding)

    def _compile(self, size: int, params: Any, param_formats: Any, one_goal: jax.ShapeDtypeStruct) -> Any:
        """The act of batch `size` over weights shaped as `params`, laid out as `param_formats`;
        `one_goal`: the goal codes of a batch of one."""
        on_device = jax.sharding.SingleDeviceSharding(self.device)
        observations = self._spec(size, self._frames_at)
        codes = jax.ShapeDtypeStruct((size, *one_goal.shape[1:]), one_goal.dtype, sharding=on_device)
        shardings = (param_formats, observations.sharding, codes.sharding)
        act = packed(self._act_fn, on_device.with_memory_kind("device") if self.host_io else None)
        return jax.jit(act, in_shardings=shardings, out_shardings=self._frames_at).lower(
            params, observations, codes).compile()

    @functools.cached_property
    def _frames_at(self) -> jax.sharding.Sharding:
        """Where each act takes its frames and leaves its answers: pinned host memory with `host_io`
        (built once: every host-io act puts its frame there)."""
        on_device = jax.sharding.SingleDeviceSharding(self.device)
        return on_device.with_memory_kind(HOST_MEMORY) if self.host_io else on_device

    # ------------------------------------------------------------------ description

    @property
    def observation_dtype(self) -> np.dtype:
        """dtype of one observation as the network takes it (uint8 images, float32 states)."""
        return np.dtype(self.policy.metadata["observation"]["dtype"])

    @property
    def image_spec(self) -> dict[str, Any] | None:
        """{"height", "width", "resize"} of an image policy, None for a state policy."""
        return self.policy.metadata.get("image")

    @property
    def fingerprint(self) -> str:
        """sha256 of params + config + normalization stats."""
        return self.policy.fingerprint

    @property
    def max_batch(self) -> int:
        """Largest compiled bucket."""
        return self.buckets[-1]

    @property
    def metadata(self) -> dict[str, Any]:
        """What /v1/metadata reports for this policy (JSON-ready)."""
        meta, stats = self.policy.metadata, self.policy.action_stats
        dataset = meta.get("dataset") or {}
        names = meta.get("action_names") or dataset.get("action_names")
        if names is None and stats.dim == len(WIDOWX_ACTION_NAMES):
            names = list(WIDOWX_ACTION_NAMES)
        image = self.image_spec
        return {
            "algorithm": self.policy.agent_name,
            "step": self.policy.step,
            "fingerprint": self.fingerprint,
            "image": None if image is None else {"height": image["height"], "width": image["width"],
                                                 "resize": image["resize"]},
            "observation": {"shape": list(self.policy.observation_shape),
                            "dtype": self.observation_dtype.name},
            "action_dim": stats.dim,
            "action_names": names,
            "action_low": list(stats.low),
            "action_high": list(stats.high),
            "control_hz": meta.get("control_hz") or dataset.get("control_hz"),
            # what the training actions' deltas were added to (robot_client.safety.ACTION_FRAMES)
            "action_frame": meta.get("action_frame", "measured"),  # checkpoints without the field: measured
            "has_distance": self.policy.has_distance,
            "batch_buckets": list(self.buckets),
            "config_name": getattr(self.policy.config, "name", None),
        }

    # ------------------------------------------------------------------ preprocessing

    def prepare(self, value: np.ndarray | bytes, field: str = "image") -> np.ndarray:
        """One observation or goal from the wire as the network takes it; ProtocolError if unfit.

        Image policies take an RGB uint8 (H, W, 3) array or PNG/JPEG bytes of any size, resized
        with the training-time function. State policies take a float32 vector of the state size
        (sent in the `image` / `goal_image` field).
        """
        image = self.image_spec
        if image is None:
            return self._prepare_state(value, field)
        if isinstance(value, bytes):
            value = decode_image_bytes(value)
        elif isinstance(value, np.ndarray):
            if value.dtype != np.uint8 or value.ndim != 3 or value.shape[-1] != 3:
                raise ProtocolError(ErrorCode.INVALID_IMAGE,
                                    f"'{field}' must be an RGB uint8 array (H, W, 3) or PNG/JPEG "
                                    f"bytes, got {value.dtype} {value.shape}")
            if value.shape[0] * value.shape[1] > MAX_PIXELS:
                raise ProtocolError(ErrorCode.INVALID_IMAGE,
                                    f"'{field}' of {value.shape[1]}x{value.shape[0]} is over "
                                    f"{MAX_PIXELS} pixels")
            if value.shape[0] == 0 or value.shape[1] == 0:
                raise ProtocolError(ErrorCode.INVALID_IMAGE, f"'{field}' has zero size {value.shape}")
        else:
            raise ProtocolError(ErrorCode.INVALID_IMAGE, f"'{field}' must be an RGB uint8 array or PNG/JPEG bytes")
        return preprocess_image(value, image["height"], image["width"], image["resize"])

    def _prepare_state(self, value: Any, field: str) -> np.ndarray:
        shape = self.policy.observation_shape
        if not isinstance(value, np.ndarray) or value.dtype.kind != "f" or value.shape != shape:
            got = f"{value.dtype} {value.shape}" if isinstance(value, np.ndarray) else type(value).__name__
            raise ProtocolError(ErrorCode.INVALID_VALUE,
                                f"this is a state policy: '{field}' must be a float32 vector of shape "
                                f"{list(shape)}, got {got}")
        state = value.astype(np.float32)
        if not np.all(np.isfinite(state)):
            raise ProtocolError(ErrorCode.INVALID_VALUE, f"'{field}' holds NaN or infinite values")
        return state

    def encode_goal(self, image: np.ndarray | bytes, preprocessed: bool = False) -> np.ndarray:
        """The goal's codes as `act` takes them, computed once and then cached by the server.

        `image` is a raw goal frame (any size, or PNG/JPEG bytes), or with `preprocessed` what
        `prepare` returns. Runs the model: call it off the event loop.
        """
        goal = image if preprocessed else self.prepare(image, "goal_image")
        return np.asarray(jax.device_get(self._compiled_goal(self._params, goal[None]))[0])

    # ------------------------------------------------------------------ acting

    def bucket_for(self, n: int) -> int:
        """Smallest compiled bucket holding n (n <= max_batch)."""
        for size in self.buckets:
            if size >= n:
                return size
        raise ValueError(f"batch of {n} is over the largest bucket {self.max_batch}")

    def act_batch(self, observations: np.ndarray, goals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Actions (N, A) float32 in robot units and distances (N,) (NaN without a critic) for
        preprocessed observations (N, *observation_shape) and `encode_goal` codes (N, ...); never
        compiles."""
        n = len(observations)
        if n == 0:
            return np.zeros((0, self.policy.action_dim), np.float32), np.zeros((0,), np.float32)
        actions, distances = [], []
        for start in range(0, n, self.max_batch):
            obs, goal = observations[start:start + self.max_batch], goals[start:start + self.max_batch]
            count, size = len(obs), self.bucket_for(len(obs))
            if size != count:  # pad with copies of the last row: valid inputs, results dropped
                pad = size - len(obs)
                obs = np.concatenate([obs, np.repeat(obs[-1:], pad, axis=0)])
                goal = np.concatenate([goal, np.repeat(goal[-1:], pad, axis=0)])
            answers = np.asarray(jax.device_get(self._compiled[size](self._params, self._frames_in(obs),
                                                                     self._device_codes(goal))))
            actions.append(answers[:count, :-1])
            distances.append(answers[:count, -1])
        return np.concatenate(actions), np.concatenate(distances)

    def _frames_in(self, observations: np.ndarray) -> Any:
        """`observations` where the compiled act takes them: as they are for the device (the call copies
        them there), put in pinned host memory first with `host_io`: on an H200 the act compiled for
        pinned host frames ran load's warm-up on a NumPy frame, then refused one on the next call, which
        had put it in device memory ('unexpected memory space', `docs/performance.md`)."""
        return jax.device_put(observations, self._frames_at) if self.host_io else observations

    def _device_codes(self, codes: np.ndarray) -> Any:
        """`codes` on the device, copied there only when they differ from the last act's: a lone robot
        sends the same goal's codes on every step of an episode, and each host-to-device copy is a step
        of the act that slows after the server has idled (`docs/performance.md`). The pair is
        replaced whole, so a concurrent call sees an old or a new pair, never a mixed one."""
        last = self._last_codes
        if last is not None and last[0].shape == codes.shape and np.array_equal(last[0], codes):
            return last[1]
        host = np.array(codes, copy=True)  # the caller may reuse its array; the comparison needs ours
        pair = self._last_codes = (host, jax.device_put(host, self.device))
        return pair[1]

    def act(self, image: np.ndarray | bytes, goal: np.ndarray) -> tuple[np.ndarray, float | None]:
        """One action (A,) float32 in robot units and the distance to the goal (None without one).

        `image` is a raw frame (any size, or PNG/JPEG bytes); `goal` comes from `encode_goal`.
        """
        obs = self.prepare(image)
        actions, distances = self.act_batch(obs[None], np.asarray(goal)[None])
        return actions[0], self.distance_or_none(distances[0])

    def distance_or_none(self, value: float) -> float | None:
        """The wire value of a distance: None for policies without a critic (or a NaN)."""
        value = float(value)
        return None if not self.policy.has_distance or math.isnan(value) else value
