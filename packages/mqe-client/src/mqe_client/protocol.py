"""Wire protocol v1 between the inference server and robot clients.

Bodies are MessagePack. A numpy array travels as the map
`{"__ndarray__": True, "data": <bytes>, "dtype": "<numpy dtype str>", "shape": [...]}` with string
keys. openpi-client's msgpack_numpy packs the same fields under *bytes* keys (b"__ndarray__", ...),
which this decoder does not read: openpi clients talk to the server's websocket endpoint
(`server/openpi_ws.py`) instead. Never pickle: decoding builds arrays from raw bytes of a short list
of plain numeric dtypes and nothing else.

This module imports only numpy and msgpack, so the robot client uses the same definitions as the
server without the training stack.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import msgpack
import numpy as np

SCHEMA_VERSION = 1
CONTENT_TYPE = "application/msgpack"
ALLOWED_DTYPES = frozenset(
    ["|b1", "|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f2", "<f4", "<f8"]
)
MAX_ARRAY_DIMS = 8


class ErrorCode:
    """The `error.code` values a server answers with."""

    MALFORMED = "malformed"  # not MessagePack, not a map, or a field of the wrong type (422)
    INVALID_IMAGE = "invalid_image"  # an image that is not RGB uint8 or cannot be decoded (422)
    INVALID_VALUE = "invalid_value"  # NaN, out of range, wrong shape (422)
    MISSING_FIELD = "missing_field"  # a required field is absent (422)
    UNKNOWN_POLICY = "unknown_policy"  # no policy of that name is loaded (404)
    UNKNOWN_GOAL = "unknown_goal"  # goal_id not in the cache: upload the goal again (404)
    PAYLOAD_TOO_LARGE = "payload_too_large"  # body over the limit (413)
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"  # not application/msgpack (415)
    UNAUTHORIZED = "unauthorized"  # bad or missing bearer token (401)
    NOT_READY = "not_ready"  # still loading or compiling (503, retryable)
    NOT_FOUND = "not_found"  # no such endpoint (404)
    METHOD_NOT_ALLOWED = "method_not_allowed"  # the endpoint exists but not for this method (405)
    INTERNAL = "internal"  # a server fault (500); never for bad input


# HTTP status of each error code.
STATUS_OF_CODE = {
    ErrorCode.MALFORMED: 422,
    ErrorCode.INVALID_IMAGE: 422,
    ErrorCode.INVALID_VALUE: 422,
    ErrorCode.MISSING_FIELD: 422,
    ErrorCode.UNKNOWN_POLICY: 404,
    ErrorCode.UNKNOWN_GOAL: 404,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.NOT_READY: 503,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.INTERNAL: 500,
}


class ProtocolError(ValueError):
    """A message that breaks the protocol; `code` is one of `ErrorCode`."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# ----------------------------------------------------------------------------- arrays and bytes


def _encode_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.str not in ALLOWED_DTYPES:
            raise TypeError(f"arrays of dtype {obj.dtype} cannot be sent; use a numeric dtype")
        arr = np.ascontiguousarray(obj)
        return {"__ndarray__": True, "data": arr.tobytes(), "dtype": arr.dtype.str, "shape": list(arr.shape)}
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot encode {type(obj).__name__}")


def array_from_wire(dtype: Any, shape: Any, data: Any) -> np.ndarray:
    """The array a message's dtype string, shape list and raw bytes describe, checked (one line saying
    what is wrong otherwise); a read-only view of `data`. Shared by this protocol and openpi's."""
    if not isinstance(dtype, str) or dtype not in ALLOWED_DTYPES:
        raise ProtocolError(ErrorCode.MALFORMED, f"array dtype {dtype!r} is not allowed; send a numeric dtype")
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_ARRAY_DIMS
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
    ):
        raise ProtocolError(ErrorCode.MALFORMED, f"array shape {shape!r} is not a list of sizes")
    if not isinstance(data, bytes):
        raise ProtocolError(ErrorCode.MALFORMED, "array data must be bytes")
    expected = math.prod(shape) * np.dtype(dtype).itemsize
    if len(data) != expected:
        raise ProtocolError(
            ErrorCode.MALFORMED,
            f"array data has {len(data)} bytes but dtype {dtype} and shape {shape} need {expected}",
        )
    return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)


def _decode_array(obj: dict) -> np.ndarray:
    return array_from_wire(obj.get("dtype"), obj.get("shape"), obj.get("data"))


def _decode_hook(obj: dict) -> Any:
    if obj.get("__ndarray__") is True:
        return _decode_array(obj)
    return obj


def packb(obj: Any) -> bytes:
    """Encode a message (dicts, lists, scalars, bytes, numpy arrays) as MessagePack."""
    return msgpack.packb(obj, default=_encode_default, use_bin_type=True)


def unpackb(data: bytes, max_size: int = 64 * 2**20) -> Any:
    """Decode MessagePack into Python objects and numpy arrays; ProtocolError on anything else."""
    if len(data) > max_size:
        raise ProtocolError(ErrorCode.PAYLOAD_TOO_LARGE, f"body of {len(data)} bytes is over {max_size}")
    try:
        return msgpack.unpackb(
            data,
            object_hook=_decode_hook,
            raw=False,
            strict_map_key=True,
        )
    except ProtocolError:
        raise
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, TypeError) as e:
        raise ProtocolError(ErrorCode.MALFORMED, f"body is not valid MessagePack: {e}") from None


# ----------------------------------------------------------------------------- field readers


def _require(body: dict, name: str) -> Any:
    if name not in body:
        raise ProtocolError(ErrorCode.MISSING_FIELD, f"missing field '{name}'")
    return body[name]


def _optional_str(body: dict, name: str, max_len: int = 256) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise ProtocolError(ErrorCode.MALFORMED, f"'{name}' must be a non-empty string of at most {max_len} characters")
    return value


def _optional_int(body: dict, name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not -(2**62) < value < 2**62:
        raise ProtocolError(ErrorCode.MALFORMED, f"'{name}' must be an integer")
    return value


def _image_field(body: dict, name: str) -> np.ndarray | bytes:
    value = _require(body, name)
    if isinstance(value, bytes):
        if not value:
            raise ProtocolError(ErrorCode.INVALID_IMAGE, f"'{name}' is empty")
        return value
    if isinstance(value, np.ndarray):
        if value.ndim == 1 and value.dtype.kind == "f":
            return value  # the state vector of a state-based policy; the server checks its size
        if value.dtype != np.uint8 or value.ndim != 3 or value.shape[-1] != 3:
            raise ProtocolError(
                ErrorCode.INVALID_IMAGE,
                f"'{name}' must be an RGB uint8 array (H, W, 3) or PNG/JPEG bytes (or, for a "
                f"state policy, a float32 vector), "
                f"got {value.dtype} {value.shape}",
            )
        if value.shape[0] == 0 or value.shape[1] == 0:
            raise ProtocolError(ErrorCode.INVALID_IMAGE, f"'{name}' has zero size {value.shape}")
        return value
    raise ProtocolError(
        ErrorCode.INVALID_IMAGE, f"'{name}' must be an RGB uint8 array or PNG/JPEG bytes"
    )


def _as_map(body: Any) -> dict:
    if not isinstance(body, dict):
        raise ProtocolError(ErrorCode.MALFORMED, "the body must be a MessagePack map")
    return body


# ----------------------------------------------------------------------------- messages


@dataclasses.dataclass(frozen=True)
class GoalRequest:
    """POST /v1/goals: upload a goal image once; the server answers a goal_id."""

    image: np.ndarray | bytes  # RGB uint8 (H, W, 3) or PNG/JPEG bytes, any size; float32 state vector for state policies
    policy: str | None = None  # which loaded policy the goal is for; None: the only/default one

    def to_wire(self) -> dict:
        """The MessagePack-ready map."""
        return {k: v for k, v in vars(self).items() if v is not None}  # asdict would deep-copy the image

    @classmethod
    def from_wire(cls, body: Any) -> GoalRequest:
        """Validate a decoded body."""
        body = _as_map(body)
        return cls(image=_image_field(body, "image"), policy=_optional_str(body, "policy"))


@dataclasses.dataclass(frozen=True)
class GoalResponse:
    """Answer to POST /v1/goals."""

    goal_id: str  # handle for /v1/act; valid until the server restarts or evicts it

    def to_wire(self) -> dict:
        """The MessagePack-ready map."""
        return {"goal_id": self.goal_id}

    @classmethod
    def from_wire(cls, body: Any) -> GoalResponse:
        """Validate a decoded body."""
        body = _as_map(body)
        goal_id = _require(body, "goal_id")
        if not isinstance(goal_id, str):
            raise ProtocolError(ErrorCode.MALFORMED, "'goal_id' must be a string")
        return cls(goal_id)


@dataclasses.dataclass(frozen=True)
class ActRequest:
    """POST /v1/act: one observation; the goal by id (preferred) or as an image."""

    image: np.ndarray | bytes  # current camera frame: RGB uint8 (H, W, 3) or PNG/JPEG bytes; float32 state vector for state policies
    goal_id: str | None = None  # from /v1/goals
    goal_image: np.ndarray | bytes | None = None  # the goal itself, when no goal_id is given
    policy: str | None = None  # which loaded policy acts; None: the only/default one
    episode_id: str | None = None  # for logs: groups the steps of one trial
    step: int | None = None  # step index within the episode, for logs
    seq: int | None = None  # echoed back so the client can drop stale replies

    def to_wire(self) -> dict:
        """The MessagePack-ready map."""
        return {k: v for k, v in vars(self).items() if v is not None}  # asdict would deep-copy the image

    @classmethod
    def from_wire(cls, body: Any) -> ActRequest:
        """Validate a decoded body."""
        body = _as_map(body)
        goal_id = _optional_str(body, "goal_id")
        goal_image = _image_field(body, "goal_image") if "goal_image" in body else None
        if goal_id is None and goal_image is None:
            raise ProtocolError(ErrorCode.MISSING_FIELD, "give either 'goal_id' or 'goal_image'")
        return cls(
            image=_image_field(body, "image"),
            goal_id=goal_id,
            goal_image=goal_image,
            policy=_optional_str(body, "policy"),
            episode_id=_optional_str(body, "episode_id"),
            step=_optional_int(body, "step"),
            seq=_optional_int(body, "seq"),
        )


@dataclasses.dataclass(frozen=True)
class Timing:
    """Server-side time of one /v1/act, in milliseconds."""

    decode_ms: float  # parsing the body and preparing the image
    infer_ms: float  # the policy call, including waiting for its micro-batch
    total_ms: float  # from the body received to the answer encoded


@dataclasses.dataclass(frozen=True)
class ActResponse:
    """Answer to POST /v1/act."""

    action: np.ndarray  # float32 (action_dim,), robot units
    distance: float | None  # MQE estimate of the steps to the goal; None for other policies
    seq: int | None  # the request's seq
    policy_fingerprint: str  # sha256 of the weights, config and normalization that acted
    timing: Timing  # where the server's time went

    def to_wire(self) -> dict:
        """The MessagePack-ready map."""
        return {
            "action": np.asarray(self.action, np.float32),
            "distance": None if self.distance is None else float(self.distance),
            "seq": self.seq,
            "policy_fingerprint": self.policy_fingerprint,
            "timing": dict(vars(self.timing)),
        }

    @classmethod
    def from_wire(cls, body: Any) -> ActResponse:
        """Validate a decoded body (the client does this before trusting an action)."""
        body = _as_map(body)
        action = _require(body, "action")
        if not isinstance(action, np.ndarray) or action.dtype != np.float32 or action.ndim != 1:
            raise ProtocolError(ErrorCode.MALFORMED, "'action' must be a float32 vector")
        distance = body.get("distance")
        if distance is not None and not isinstance(distance, (int, float)):
            raise ProtocolError(ErrorCode.MALFORMED, "'distance' must be a number or null")
        timing = _as_map(_require(body, "timing"))
        try:
            parsed_timing = Timing(**{k: float(timing[k]) for k in ("decode_ms", "infer_ms", "total_ms")})
        except (KeyError, TypeError, ValueError):
            raise ProtocolError(ErrorCode.MALFORMED, "'timing' needs decode_ms, infer_ms, total_ms") from None
        fingerprint = _require(body, "policy_fingerprint")
        if not isinstance(fingerprint, str):
            raise ProtocolError(ErrorCode.MALFORMED, "'policy_fingerprint' must be a string")
        return cls(action, None if distance is None else float(distance), _optional_int(body, "seq"), fingerprint, parsed_timing)


@dataclasses.dataclass(frozen=True)
class ErrorBody:
    """The body of every 4xx/5xx answer: `{"error": {"code", "message", "retryable"}}`."""

    code: str  # one of ErrorCode
    message: str  # what was wrong and how to fix it
    retryable: bool = False  # true when the same request may succeed later (503)

    def to_wire(self) -> dict:
        """The MessagePack/JSON-ready map."""
        return {"error": dataclasses.asdict(self)}

    @classmethod
    def from_wire(cls, body: Any) -> ErrorBody:
        """Parse an error answer; a body that is not one becomes an `internal` error."""
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            return cls(ErrorCode.INTERNAL, f"unexpected error body: {body!r}"[:500])
        return cls(str(error.get("code")), str(error.get("message")), bool(error.get("retryable", False)))
