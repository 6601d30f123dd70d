"""openpi's websocket policy protocol beside the HTTP one, for robots that run `openpi-client`.

openpi-client's `WebsocketClientPolicy(host, port)` connects to `ws://host:port/` and:

1. receives one metadata frame (a msgpack map) as soon as the connection opens;
2. sends each observation as a msgpack map packed by `openpi_client.msgpack_numpy`, whose arrays
   are maps with *bytes* keys `{b"__ndarray__": True, b"data", b"dtype", b"shape"}` (numpy scalars
   `{b"__npgeneric__": True, b"data", b"dtype"}`);
3. receives the answer packed the same way, or a text frame holding an error.

Observation keys (docs/interop.md):

| key | meaning |
| --- | --- |
| `observation/image` | the current camera frame, RGB uint8 (H, W, 3) or PNG/JPEG bytes (a float32 vector for state policies) |
| `goal/image` | the goal, the same kinds; needed in the first message of a connection, kept for the next ones, replaced when sent again |
| `policy` | optional: which loaded policy acts (default: the server's default) |
| `episode_id` | optional: groups the steps in the server's log (default: one id per connection) |

The answer: `actions` float32 (1, action_dim), an action chunk of one step in robot units (openpi's
`actions` is (horizon, action_dim)); `distance` (MQE's steps-to-goal estimate or None);
`policy_fingerprint`; `server_timing` {`infer_ms`, `decode_ms`, `total_ms`}. A message that breaks
these rules gets one text frame `<code>: <what was wrong and how to fix it>` (openpi-client raises
it as a RuntimeError) and the connection stays open; a server fault closes it with code 1011.
The bearer token, when set, is taken as `Authorization: Bearer <token>` or openpi's
`Authorization: Api-Key <token>`.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import time
from typing import Any

import msgpack
import numpy as np
from fastapi import FastAPI, WebSocket, WebSocketDisconnect

from mqe_client import protocol
from mqe_client.protocol import ErrorCode, ProtocolError

logger = logging.getLogger(__name__)

PATH = "/"  # where WebsocketClientPolicy(host, port) connects
IMAGE_KEY = "observation/image"
GOAL_KEY = "goal/image"
POLICY_KEY = "policy"
EPISODE_KEY = "episode_id"
READY_POLL_S = 0.1  # how often a connection opened during warm-up checks whether the policies are ready
OFFLOAD_BYTES = 256 * 1024  # messages larger than this are decoded in a thread, off the event loop


# ----------------------------------------------------------------------------- openpi's msgpack-numpy


def _openpi_hook(obj: dict) -> Any:
    if b"__ndarray__" in obj:
        return protocol.array_from_wire(obj.get(b"dtype"), obj.get(b"shape"), obj.get(b"data"))
    if b"__npgeneric__" in obj:
        dtype, value = obj.get(b"dtype"), obj.get(b"data")
        if not isinstance(dtype, str) or dtype not in protocol.ALLOWED_DTYPES or not isinstance(value, int | float):
            raise ProtocolError(ErrorCode.MALFORMED, f"numpy scalar of dtype {dtype!r} is not allowed")
        return np.dtype(dtype).type(value)
    return obj


def unpack_openpi(data: bytes) -> Any:
    """An openpi-client message as Python objects and numpy arrays; ProtocolError on anything else."""
    try:
        return msgpack.unpackb(data, object_hook=_openpi_hook, raw=False, strict_map_key=True)
    except ProtocolError:
        raise
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, TypeError) as e:
        raise ProtocolError(ErrorCode.MALFORMED, f"message is not valid MessagePack: {e}") from None


def _openpi_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        return {b"__ndarray__": True, b"data": arr.tobytes(), b"dtype": arr.dtype.str, b"shape": list(arr.shape)}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"cannot encode {type(obj).__name__}")


def pack_openpi(obj: Any) -> bytes:
    """MessagePack that openpi_client.msgpack_numpy.unpackb decodes (arrays with bytes keys)."""
    return msgpack.packb(obj, default=_openpi_default, use_bin_type=True)


# ----------------------------------------------------------------------------- the endpoint


def _wire_value(message: dict, key: str) -> np.ndarray | bytes:
    """An image (or state) field checked as /v1/act checks its own, errors naming openpi's key."""
    if key not in message:
        raise ProtocolError(ErrorCode.MISSING_FIELD, f"missing key '{key}'")
    try:
        return protocol.GoalRequest.from_wire({"image": message[key]}).image
    except ProtocolError as e:
        raise ProtocolError(e.code, e.message.replace("'image'", f"'{key}'")) from None


def _optional_text(message: dict, key: str) -> str | None:
    value = message.get(key)
    if value is not None and (not isinstance(value, str) or not value or len(value) > 256):
        raise ProtocolError(ErrorCode.MALFORMED, f"'{key}' must be a non-empty string of at most 256 characters")
    return value


def _authorized(websocket: WebSocket, token: str | None) -> bool:
    if token is None:
        return True
    scheme, _, given = websocket.headers.get("authorization", "").partition(" ")
    ok = hmac.compare_digest(given.strip().encode("utf-8", "replace"), token.encode())
    return scheme.lower() in ("bearer", "api-key") and ok


class _Connection:
    """What one websocket keeps between its messages: the goal and the default episode id."""

    def __init__(self, state: Any):
        self.state = state
        self.goal: tuple[str, str, np.ndarray] | None = None  # (policy name, its fingerprint, encoded goal)
        self.episode_id = f"openpi-{secrets.token_urlsafe(8)}"

    def metadata(self) -> dict[str, Any]:
        state = self.state
        default = state.settings.default_policy or (next(iter(state.runtimes)) if len(state.runtimes) == 1 else None)
        return {"schema_version": protocol.SCHEMA_VERSION, "protocol": "openpi-websocket",
                "default_policy": default,
                "policies": [{"name": name, **runtime.metadata} for name, runtime in state.runtimes.items()],
                "observation_keys": {"image": IMAGE_KEY, "goal": GOAL_KEY, "policy": POLICY_KEY,
                                     "episode_id": EPISODE_KEY},
                "action_key": "actions"}

    async def answer(self, data: bytes) -> dict[str, Any]:
        """One observation message to its answer; ProtocolError for bad input."""
        state = self.state
        start = time.perf_counter()
        if len(data) > state.settings.max_body_bytes:
            raise ProtocolError(ErrorCode.PAYLOAD_TOO_LARGE,
                                f"message of {len(data)} bytes is over the limit of {state.settings.max_body_bytes}; "
                                "send images resized to the policy's size (see the metadata frame)")
        # The announcement lets the batcher wait for this request to fill a batch.
        with state.pending.announced() as withdraw:
            decode = lambda: unpack_openpi(data)  # noqa: E731
            message = await asyncio.to_thread(decode) if len(data) > OFFLOAD_BYTES else decode()
            if not isinstance(message, dict):
                raise ProtocolError(ErrorCode.MALFORMED, "a message must be a map of observation keys")
            name, runtime = state.resolve_policy(_optional_text(message, POLICY_KEY))
            episode_id = _optional_text(message, EPISODE_KEY) or self.episode_id
            if GOAL_KEY in message:
                goal_value = _wire_value(message, GOAL_KEY)
                self.goal = (name, runtime.fingerprint, await asyncio.to_thread(runtime.encode_goal, goal_value))
            if self.goal is None:
                raise ProtocolError(ErrorCode.MISSING_FIELD,
                                    f"no goal yet: send '{GOAL_KEY}' with the first observation of the connection")
            goal_policy, goal_fingerprint, goal = self.goal
            if (goal_policy, goal_fingerprint) != (name, runtime.fingerprint):
                raise ProtocolError(ErrorCode.INVALID_VALUE,
                                    f"the goal was sent for policy {goal_policy!r}: send '{GOAL_KEY}' again for {name!r}")
            image = _wire_value(message, IMAGE_KEY)
            prepare = lambda: runtime.prepare(image)  # noqa: E731
            observation = await asyncio.to_thread(prepare) if len(data) > OFFLOAD_BYTES else prepare()
            decoded = time.perf_counter()
            future = state.batchers[name].submit(runtime, observation, goal)
            withdraw()  # after the submit: a worker waiting for it finds it queued
            result = await asyncio.wrap_future(future)
        done = time.perf_counter()
        total_ms = (done - start) * 1000
        state.episodes.record(episode_id, name, total_ms)
        return {"actions": np.asarray(result.action, np.float32)[None],
                "distance": None if result.distance is None else float(result.distance),
                "policy_fingerprint": runtime.fingerprint,
                "server_timing": {"infer_ms": (done - decoded) * 1000, "decode_ms": (decoded - start) * 1000,
                                  "total_ms": total_ms}}


def add_openpi_route(app: FastAPI) -> None:
    """Serve openpi's websocket protocol at `PATH` from the app's `ServerState` (app.state.server)."""

    async def openpi_endpoint(websocket: WebSocket) -> None:
        state = websocket.app.state.server
        if not _authorized(websocket, state.settings.token):
            await websocket.close(code=1008, reason="missing or wrong token: send 'Authorization: Api-Key <token>'")
            return
        await websocket.accept()
        while not state.ready and state.load_error is None:  # the metadata frame waits for the policies
            await asyncio.sleep(READY_POLL_S)
        if state.load_error is not None:
            await websocket.send_text(f"{ErrorCode.NOT_READY}: loading the policies failed: {state.load_error}")
            await websocket.close(code=1011)
            return
        connection = _Connection(state)
        metrics = state.metrics
        await websocket.send_bytes(pack_openpi(connection.metadata()))
        try:
            while True:
                frame = await websocket.receive()
                if frame["type"] == "websocket.disconnect":
                    return
                data = frame.get("bytes")
                if data is None:
                    data = (frame.get("text") or "").encode()
                try:
                    reply = await connection.answer(data)
                except ProtocolError as e:
                    metrics.child(metrics.requests, "openpi", str(protocol.STATUS_OF_CODE.get(e.code, 500))).inc()
                    await websocket.send_text(f"{e.code}: {e.message}"[:2000])
                    continue
                metrics.child(metrics.requests, "openpi", "200").inc()
                await websocket.send_bytes(pack_openpi(reply))
        except WebSocketDisconnect:
            return
        except Exception as e:
            logger.exception("internal error on the openpi websocket")
            metrics.child(metrics.requests, "openpi", "500").inc()
            await websocket.send_text(f"{ErrorCode.INTERNAL}: internal server error ({type(e).__name__})")
            await websocket.close(code=1011)

    app.router.add_websocket_route(PATH, openpi_endpoint)
