"""The inference server's client: metadata checks, goal upload, /v1/act with a hard deadline.

Messages are wire protocol v1 (`mqe_client.protocol`). HTTP is the standard library's `http.client`
on keep-alive connections, so the client installs beside any ROS Python with numpy and msgpack only.
Every request has a deadline for the whole of it; /v1/act also runs on a worker thread that the loop
waits on with the step's deadline, so a slow or trickling server can never delay the arm. A lost
server is retried with exponential backoff; `unknown_goal` (a restarted server) re-uploads the goal.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import http.client
import json
import logging
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from typing import Any

import numpy as np

from mqe_client.protocol import (
    CONTENT_TYPE,
    SCHEMA_VERSION,
    ActRequest,
    ActResponse,
    ErrorBody,
    ErrorCode,
    GoalRequest,
    GoalResponse,
    ProtocolError,
    packb,
    unpackb,
)

logger = logging.getLogger(__name__)


class ServerError(RuntimeError):
    """A request failed; `code` is an ErrorCode or 'unreachable'/'timeout'/'backoff'."""

    def __init__(self, code: str, message: str, retryable: bool = True):
        super().__init__(message)
        self.code, self.message, self.retryable = code, message, retryable


class MetadataMismatch(ValueError):
    """The server's policy does not fit this client or robot; the message says how to fix it."""


@dataclasses.dataclass(frozen=True)
class PolicyInfo:
    """One policy of GET /v1/metadata, checked against what the robot client can drive."""

    name: str
    algorithm: str
    step: int | None
    fingerprint: str
    image_size: tuple[int, int]  # (height, width) the client resizes frames to
    action_dim: int
    control_hz: float | None
    raw: dict  # the server's whole entry, for meta.json


def check_metadata(meta: Any, policy: str | None, action_names: Sequence[str]) -> PolicyInfo:
    """Pick the policy from /v1/metadata and check protocol version, actions and image size.

    `action_names` are the action components the robot takes, in order (its action dimension).
    """
    action_names = tuple(action_names)
    if not isinstance(meta, dict) or not isinstance(meta.get("policies"), list):
        raise MetadataMismatch(f"/v1/metadata is not a metadata document: {str(meta)[:200]}")
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION:
        raise MetadataMismatch(f"server speaks protocol version {version}, this client {SCHEMA_VERSION}: "
                               "install matching versions of mqe-deploy on both machines")
    policies = {p.get("name"): p for p in meta["policies"] if isinstance(p, dict)}
    if not policies:
        raise MetadataMismatch("the server has no policy loaded")
    if policy is None and meta.get("default_policy") in policies:
        policy = meta["default_policy"]
    if policy is None:
        if len(policies) > 1:
            raise MetadataMismatch(f"the server serves {len(policies)} policies; choose one with "
                                   f"--policy ({', '.join(sorted(map(str, policies)))})")
        entry = next(iter(policies.values()))
    elif policy not in policies:
        raise MetadataMismatch(f"unknown policy '{policy}'; the server has {', '.join(sorted(map(str, policies)))}")
    else:
        entry = policies[policy]
    name = str(entry.get("name"))
    if entry.get("action_dim") != len(action_names):
        raise MetadataMismatch(f"policy '{name}' has action_dim {entry.get('action_dim')}; the robot takes "
                               f"{len(action_names)} ({', '.join(action_names)}): serve a policy for this robot")
    names = entry.get("action_names")
    if names is not None and tuple(names) != action_names:
        raise MetadataMismatch(f"policy '{name}' actions are {names}, not {list(action_names)}")
    if "image" not in entry:
        raise MetadataMismatch(f"policy '{name}' metadata has no 'image' entry (its image size)")
    image = entry["image"]
    if image is None:
        raise MetadataMismatch(f"policy '{name}' is state-based (image null); the robot client "
                               "drives image policies only: serve a pixel checkpoint")
    if not isinstance(image, dict):
        raise MetadataMismatch(f"policy '{name}' image {image!r} is not {{height, width, resize}}")
    if image.get("resize", "area") != "area":
        raise MetadataMismatch(f"policy '{name}' was trained with resize '{image['resize']}'; this client "
                               "resizes with area interpolation only")
    size = [image.get("height"), image.get("width")]
    if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in size):
        raise MetadataMismatch(f"policy '{name}' image {image!r} has no positive integer height and width")
    hz = entry.get("control_hz")
    return PolicyInfo(name, str(entry.get("algorithm", "")), entry.get("step"), str(entry.get("fingerprint", "")),
                      (int(size[0]), int(size[1])), int(entry["action_dim"]),
                      None if hz is None else float(hz), entry)


@dataclasses.dataclass
class ActResult:
    """One /v1/act answer with the client's view of it."""

    response: ActResponse
    round_trip_ms: float  # from the request sent to the answer parsed, in the worker
    goal_reuploaded: bool  # the server had lost the goal and it was uploaded again first


class PolicyClient:
    """HTTP client of one policy on the inference server."""

    def __init__(self, base_url: str, token: str | None = None, timeout_s: float = 0.15,
                 backoff_initial_s: float = 0.05, backoff_max_s: float = 1.0):
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout_s = timeout_s
        self._http = Connections(self.base_url, headers)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="act")
        self._lock = threading.Lock()
        self.backoff_initial_s, self.backoff_max_s = backoff_initial_s, backoff_max_s
        self._backoff_s = 0.0
        self._retry_at = 0.0
        self.policy: str | None = None
        self.goal_image: np.ndarray | None = None
        self.goal_id: str | None = None
        self.goal_uploads = 0

    # ---- plumbing ---------------------------------------------------------------------------
    def _request(self, method: str, path: str, timeout_s: float, body: bytes | None = None,
                 headers: dict[str, str] | None = None) -> Reply:
        try:
            return self._http.request(method, path, timeout_s, body, headers)
        except TimeoutError as e:
            raise ServerError("timeout", f"{path}: no answer in {timeout_s * 1000:.0f} ms ({type(e).__name__})") from None
        except OSError as e:
            raise ServerError("unreachable", f"{path}: {type(e).__name__}: {e}") from None

    def _post(self, path: str, body: dict, timeout_s: float) -> Any:
        reply = self._request("POST", path, timeout_s, packb(body), {"Content-Type": CONTENT_TYPE})
        return self._decode(path, reply)

    @staticmethod
    def _decode(path: str, reply: Reply) -> Any:
        body = _msgpack_or_none(reply) if reply.body else None
        if body is None and reply.body:
            body = _json_or_none(reply)
        if reply.status >= 400:
            err = ErrorBody.from_wire(body)
            retryable = err.retryable or reply.status in (502, 503, 504)
            raise ServerError(err.code, f"{path}: HTTP {reply.status} {err.code}: {err.message}", retryable)
        return body

    def _note_failure(self, error: ServerError) -> None:
        if error.code in ("unreachable", ErrorCode.NOT_READY) or error.code == "timeout":
            with self._lock:
                self._backoff_s = min(self.backoff_max_s, max(self.backoff_initial_s, self._backoff_s * 2))
                self._retry_at = time.monotonic() + self._backoff_s

    def _note_success(self) -> None:
        with self._lock:
            self._backoff_s, self._retry_at = 0.0, 0.0

    def backoff_left_s(self) -> float:
        """Seconds before act() will try a lost server again (0 when it may try now)."""
        with self._lock:
            return max(0.0, self._retry_at - time.monotonic())

    # ---- endpoints --------------------------------------------------------------------------
    def metadata(self, timeout_s: float = 5.0) -> dict:
        """GET /v1/metadata as JSON; ServerError if unreachable or failing."""
        reply = self._request("GET", "/v1/metadata", timeout_s)
        if reply.status >= 400:
            err = ErrorBody.from_wire(_json_or_none(reply) or _msgpack_or_none(reply))
            raise ServerError(err.code, f"/v1/metadata: HTTP {reply.status} {err.code}: {err.message}",
                              err.retryable)
        meta = _json_or_none(reply)
        if meta is None:
            raise ServerError(ErrorCode.MALFORMED, "/v1/metadata did not answer JSON", False)
        return meta

    def ready(self, timeout_s: float = 2.0) -> bool:
        """Whether GET /readyz answers 200."""
        try:
            return self._request("GET", "/readyz", timeout_s).status == 200
        except ServerError:
            return False

    def set_goal(self, image: np.ndarray, policy: str | None, timeout_s: float = 5.0) -> str:
        """Upload the goal image (already resized) once; later /v1/act calls use its goal_id."""
        self.goal_image, self.policy = image, policy
        return self._upload_goal(timeout_s)

    def _upload_goal(self, timeout_s: float) -> str:
        body = self._post("/v1/goals", GoalRequest(self.goal_image, self.policy).to_wire(), timeout_s)
        goal_id = GoalResponse.from_wire(body).goal_id
        with self._lock:
            self.goal_id = goal_id
            self.goal_uploads += 1
        logger.info("goal uploaded: %s", goal_id)
        return goal_id

    def act(self, image: np.ndarray, seq: int, step: int, episode_id: str, timeout_s: float) -> ActResult:
        """POST /v1/act (blocking, at most ~timeout_s per request); re-uploads a lost goal once."""
        if self.goal_id is None:
            raise RuntimeError("PolicyClient has no goal. Run .set_goal() first.")
        with self._lock:
            wait = self._retry_at - time.monotonic()
        if wait > 0:
            raise ServerError("backoff", f"server unavailable; next try in {wait * 1000:.0f} ms")
        start = time.perf_counter()
        reuploaded = False
        try:
            try:
                body = self._post("/v1/act", self._act_request(image, seq, step, episode_id), timeout_s)
            except ServerError as e:
                if e.code != ErrorCode.UNKNOWN_GOAL:
                    raise
                logger.warning("server lost the goal (restarted?); uploading it again")
                left = timeout_s - (time.perf_counter() - start)
                self._upload_goal(max(left, 0.01))
                reuploaded = True
                left = timeout_s - (time.perf_counter() - start)
                body = self._post("/v1/act", self._act_request(image, seq, step, episode_id), max(left, 0.01))
            response = ActResponse.from_wire(body)
        except ProtocolError as e:
            raise ServerError(e.code, f"/v1/act answer breaks the protocol: {e.message}", True) from None
        except ServerError as e:
            self._note_failure(e)
            raise
        self._note_success()
        return ActResult(response, (time.perf_counter() - start) * 1000, reuploaded)

    def _act_request(self, image: np.ndarray, seq: int, step: int, episode_id: str) -> dict:
        return ActRequest(image=image, goal_id=self.goal_id, policy=self.policy, episode_id=episode_id,
                          step=step, seq=seq).to_wire()

    def act_async(self, image: np.ndarray, seq: int, step: int, episode_id: str,
                  timeout_s: float) -> concurrent.futures.Future:
        """act() on a worker thread; the loop waits on the future with its own deadline."""
        return self._pool.submit(self.act, image, seq, step, episode_id, timeout_s)

    def close(self) -> None:
        """Close the connection pool; abandoned requests finish within their timeouts."""
        if sys.version_info >= (3, 9):
            self._pool.shutdown(wait=False, cancel_futures=True)
        else:  # Python 3.8 (ROS Noetic): queued requests run out their own timeouts
            self._pool.shutdown(wait=False)
        self._http.close()

    def __enter__(self) -> PolicyClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class Reply:
    """One HTTP answer, read whole."""

    status: int
    body: bytes


class Connections:
    """Keep-alive HTTP/1.1 to one server through `http.client`, shared by threads.

    A request takes an idle connection (or opens one) and gives it back once the whole answer is
    read; a connection whose request failed in any way is closed, never reused. A kept-alive
    connection the server closed while idle (its keep-alive timeout, a restart) fails before any
    answer byte: that request is sent once more on a fresh connection. `timeout_s` bounds the whole
    request: each socket operation gets the time left, so a trickling server cannot stretch it.
    """

    MAX_IDLE = 4  # the act worker threads, the main thread and a spare

    def __init__(self, base_url: str, headers: dict[str, str]):
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"server URL {base_url!r}: give http://HOST:PORT (https:// for TLS)")
        self._host = parts.hostname
        self._port = parts.port
        self._tls = parts.scheme == "https"
        self._prefix = parts.path.rstrip("/")
        self._headers = dict(headers)
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def request(self, method: str, path: str, timeout_s: float, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        """Send one request and read its whole answer: TimeoutError past `timeout_s`, ConnectionError
        on any other transport failure."""
        deadline = time.monotonic() + timeout_s
        all_headers = {**self._headers, **(headers or {})}
        conn, reused = self._take(timeout_s)
        try:
            return self._exchange(conn, method, path, body, all_headers, deadline)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            conn.close()
            if not reused:
                raise ConnectionError(f"{path}: the server closed the connection") from None
        except BaseException as e:
            conn.close()
            _raise_transport(e)
        # The idle connection had been closed by the server: one fresh try, inside the same deadline.
        conn, _ = self._take(max(deadline - time.monotonic(), 0.001), fresh=True)
        try:
            return self._exchange(conn, method, path, body, all_headers, deadline)
        except BaseException as e:
            conn.close()
            _raise_transport(e)
            raise  # unreachable: _raise_transport always raises

    def _exchange(self, conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None,
                  headers: dict[str, str], deadline: float) -> Reply:
        _set_timeout(conn, deadline)
        conn.request(method, self._prefix + path, body=body, headers=headers)
        _set_timeout(conn, deadline)
        response = conn.getresponse()
        chunks = []
        while True:
            _set_timeout(conn, deadline)
            chunk = response.read(65536)  # read(amt) marks the response done at its end; read1 may not
            if not chunk:
                break
            chunks.append(chunk)
        status, keep = response.status, not response.will_close
        if keep:
            self._give_back(conn)
        else:
            conn.close()
        return Reply(status, b"".join(chunks))

    def _take(self, timeout_s: float, fresh: bool = False) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._closed:
                raise ConnectionError("the client is closed")
            if self._idle and not fresh:
                return self._idle.pop(), True
        cls = http.client.HTTPSConnection if self._tls else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=max(timeout_s, 0.001))
        try:
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException as e:
            conn.close()
            _raise_transport(e)
        return conn, False

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close the idle connections; those in use close when their request ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _set_timeout(conn: http.client.HTTPConnection, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    if conn.sock is not None:
        conn.sock.settimeout(left)


def _raise_transport(error: BaseException) -> None:
    """Re-raise a transport failure as TimeoutError or ConnectionError; anything else unchanged."""
    if isinstance(error, (TimeoutError, socket.timeout)):  # distinct classes before Python 3.10
        raise TimeoutError(str(error) or "timed out") from None
    if isinstance(error, (OSError, http.client.HTTPException)):
        raise ConnectionError(f"{type(error).__name__}: {error}") from None
    raise error


def _msgpack_or_none(reply: Reply) -> Any:
    try:
        return unpackb(reply.body)
    except ProtocolError:
        return None


def _json_or_none(reply: Reply) -> Any:
    try:
        return json.loads(reply.body)
    except ValueError:
        return None
