"""The inference server's client: metadata checks, goal upload, /v1/act with a hard deadline.

Messages are wire protocol v1 from `server.protocol` (numpy and msgpack only). HTTP is libcurl's,
through pycurl, on keep-alive connections: at 5 Hz (an idle client between steps) its request path
costs ~0.25 ms less than the standard library's `http.client` on loopback, which cost ~0.7 ms less
than httpx's (docs/benchmarks.md, "Request overhead outside the model" and "The robots' POSTs past
the middleware stack"). Every request has a deadline for the whole of it; /v1/act also runs on a
worker thread that the loop waits on with the step's deadline, so a slow or trickling server can
never delay the arm. A lost server is retried with exponential backoff; `unknown_goal`
(a restarted server) re-uploads the goal.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import logging
import ssl
import sys
import threading
import time
import urllib.parse
from typing import Any

import numpy as np
import pycurl

from robot_client import safety
from server.protocol import (
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


def check_metadata(meta: Any, policy: str | None) -> PolicyInfo:
    """Pick the policy from /v1/metadata and check protocol version, action dim and image size."""
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
    if entry.get("action_dim") != safety.ACTION_DIM:
        raise MetadataMismatch(f"policy '{name}' has action_dim {entry.get('action_dim')}; the WidowX takes "
                               f"{safety.ACTION_DIM} ({', '.join(safety.ACTION_NAMES)}): serve a Bridge-style policy")
    # Field names as server.runtime.PolicyRuntime.metadata writes them.
    names = entry.get("action_names")
    if names is not None and tuple(names) != safety.ACTION_NAMES:
        raise MetadataMismatch(f"policy '{name}' actions are {names}, not {list(safety.ACTION_NAMES)}")
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
    """Keep-alive HTTP/1.1 to one server through libcurl (pycurl), shared by threads.

    A request takes an idle curl handle (or makes one) and gives it back once the whole answer is
    read; a handle whose request failed in any way is closed, never reused. libcurl keeps each
    handle's connection alive, notices before reuse when the server has closed it while idle (its
    keep-alive timeout, a restart) and connects again. `timeout_s` bounds the whole request, connect
    to last byte, so a trickling server cannot stretch it.
    """

    MAX_IDLE = 4  # the act worker threads, the main thread and a spare

    def __init__(self, base_url: str, headers: dict[str, str]):
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"server URL {base_url!r}: give http://HOST:PORT (https:// for TLS)")
        self._base = base_url.rstrip("/")
        # "Expect:" drops libcurl's Expect: 100-continue, a wait for a go-ahead before big bodies.
        self._headers = [f"{k}: {v}" for k, v in headers.items()] + ["Expect:"]  # with every request
        self._tls = parts.scheme == "https"
        self._idle: list[pycurl.Curl] = []
        self._lock = threading.Lock()
        self._closed = False

    def request(self, method: str, path: str, timeout_s: float, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        """Send one request and read its whole answer: TimeoutError past `timeout_s`, ConnectionError
        on any other transport failure."""
        handle = self._take()
        chunks: list[bytes] = []
        try:
            handle.setopt(pycurl.URL, self._base + path)
            handle.setopt(pycurl.HTTPHEADER, self._headers + [f"{k}: {v}" for k, v in (headers or {}).items()])
            handle.setopt(pycurl.TIMEOUT_MS, max(1, round(timeout_s * 1000)))
            if method == "POST":
                handle.setopt(pycurl.POSTFIELDS, body or b"")
            else:
                handle.setopt(pycurl.HTTPGET, True)
            handle.setopt(pycurl.WRITEFUNCTION, chunks.append)
            handle.perform()
            status = handle.getinfo(pycurl.RESPONSE_CODE)
        except pycurl.error as e:
            handle.close()
            code, message = e.args
            if code == pycurl.E_OPERATION_TIMEDOUT:
                raise TimeoutError(message) from None
            raise ConnectionError(f"{message} (libcurl error {code})") from None
        except BaseException:
            handle.close()
            raise
        self._give_back(handle)
        return Reply(status, b"".join(chunks))

    def _take(self) -> pycurl.Curl:
        with self._lock:
            if self._closed:
                raise ConnectionError("the client is closed")
            if self._idle:
                return self._idle.pop()
        handle = pycurl.Curl()
        handle.setopt(pycurl.NOSIGNAL, True)  # timeouts without SIGALRM: safe in threads
        handle.setopt(pycurl.TCP_NODELAY, True)
        handle.setopt(pycurl.PROXY, "")  # libcurl reads http_proxy from the environment; http.client never did
        if self._tls:
            verify = ssl.get_default_verify_paths()  # the system's CAs, as http.client would use
            if verify.cafile:
                handle.setopt(pycurl.CAINFO, verify.cafile)
            if verify.capath:
                handle.setopt(pycurl.CAPATH, verify.capath)
        return handle

    def _give_back(self, handle: pycurl.Curl) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.MAX_IDLE:
                self._idle.append(handle)
                return
        handle.close()

    def close(self) -> None:
        """Close the idle handles; those in use close when their request ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for handle in idle:
            handle.close()


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
