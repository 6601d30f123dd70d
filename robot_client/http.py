"""The inference server's client: metadata checks, goal upload, /v1/act with a hard deadline.

Messages are wire protocol v1 from `server.protocol` (numpy and msgpack only). Every request has a
connect, read, write and pool timeout; /v1/act also runs on a worker thread that the loop waits
on with the step's deadline, so a slow or trickling server can never delay the arm. A lost
server is retried with exponential backoff; `unknown_goal` (a restarted server) re-uploads the goal.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import time
from typing import Any

import httpx
import numpy as np

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
        self._http = httpx.Client(base_url=self.base_url, headers=headers,
                                  timeout=httpx.Timeout(timeout_s), trust_env=False)
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
    def _post(self, path: str, body: dict, timeout_s: float) -> Any:
        try:
            reply = self._http.post(path, content=packb(body), headers={"Content-Type": CONTENT_TYPE},
                                    timeout=httpx.Timeout(timeout_s))
        except httpx.TimeoutException as e:
            raise ServerError("timeout", f"{path}: no answer in {timeout_s * 1000:.0f} ms ({type(e).__name__})") from None
        except httpx.TransportError as e:
            raise ServerError("unreachable", f"{path}: {type(e).__name__}: {e}") from None
        return self._decode(path, reply)

    @staticmethod
    def _decode(path: str, reply: httpx.Response) -> Any:
        try:
            body = unpackb(reply.content) if reply.content else None
        except ProtocolError:
            try:
                body = reply.json()
            except ValueError:
                body = None
        if reply.status_code >= 400:
            err = ErrorBody.from_wire(body)
            retryable = err.retryable or reply.status_code in (502, 503, 504)
            raise ServerError(err.code, f"{path}: HTTP {reply.status_code} {err.code}: {err.message}", retryable)
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
        try:
            reply = self._http.get("/v1/metadata", timeout=httpx.Timeout(timeout_s))
        except httpx.TransportError as e:
            raise ServerError("unreachable", f"{type(e).__name__}: {e}") from None
        if reply.status_code >= 400:
            err = ErrorBody.from_wire(_json_or_none(reply) or _msgpack_or_none(reply))
            raise ServerError(err.code, f"/v1/metadata: HTTP {reply.status_code} {err.code}: {err.message}",
                              err.retryable)
        meta = _json_or_none(reply)
        if meta is None:
            raise ServerError(ErrorCode.MALFORMED, "/v1/metadata did not answer JSON", False)
        return meta

    def ready(self, timeout_s: float = 2.0) -> bool:
        """Whether GET /readyz answers 200."""
        try:
            return self._http.get("/readyz", timeout=httpx.Timeout(timeout_s)).status_code == 200
        except httpx.TransportError:
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
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    def __enter__(self) -> PolicyClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _msgpack_or_none(reply: httpx.Response) -> Any:
    try:
        return unpackb(reply.content)
    except ProtocolError:
        return None


def _json_or_none(reply: httpx.Response) -> Any:
    try:
        return reply.json()
    except ValueError:
        return None
