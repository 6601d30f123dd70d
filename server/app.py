"""The FastAPI app: the wire protocol v1 endpoints (`mqe_client.protocol`) over loaded `PolicyRuntime`s.

    app = create_app(settings)        # policies load in a background thread started by the lifespan
    uvicorn.run(app, host=settings.host, port=settings.port)

/healthz answers at once; /readyz and /v1/* answer 503 `not_ready` (retryable) until every policy is
loaded and warmed. Bad input of any kind answers a 4xx `ErrorBody` (MessagePack when the request
was MessagePack, JSON otherwise), never a 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from mqe_client import protocol
from mqe_client.protocol import ErrorBody, ErrorCode, ProtocolError
from server.batching import MicroBatcher, PendingCounter
from server.episodes import EpisodeLog
from server.goals import GoalCache
from server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from server.metrics import ServerMetrics
from server.openpi_ws import add_openpi_route
from server.settings import ServeSettings

logger = logging.getLogger(__name__)

MSGPACK_TYPES = ("application/msgpack", "application/x-msgpack", "application/vnd.msgpack")
OFFLOAD_BYTES = 256 * 1024  # bodies larger than this are decoded in a thread, off the event loop

# loader(settings) -> {name: PolicyRuntime}; replaced in tests to control the warm-up.
Loader = Callable[[ServeSettings], dict[str, Any]]


def load_runtimes(settings: ServeSettings) -> dict[str, Any]:
    """Load every `--policy`, placed round-robin on the local devices, compiled and warmed."""
    import jax

    from server.runtime import PolicyRuntime, conv_on, encoders_on

    devices = jax.local_devices()
    runtimes = {}
    for i, (name, path) in enumerate(settings.policies.items()):
        device = devices[i % len(devices)]
        runtimes[name] = PolicyRuntime.load(path, settings.batch_buckets, device, name,
                                            encoders_on(device.platform), conv=conv_on(device.platform))
    return runtimes


@dataclasses.dataclass
class ServerState:
    """Everything the endpoints share."""

    settings: ServeSettings
    metrics: ServerMetrics
    goals: GoalCache
    episodes: EpisodeLog
    pending: PendingCounter = dataclasses.field(default_factory=PendingCounter)
    runtimes: dict[str, Any] = dataclasses.field(default_factory=dict)
    batchers: dict[str, MicroBatcher] = dataclasses.field(default_factory=dict)  # by policy name
    ready: bool = False
    load_error: str | None = None

    def start_loading(self, loader: Loader) -> threading.Thread:
        """Load the policies in a background thread so /healthz answers during warm-up."""

        def run() -> None:
            start = time.perf_counter()
            try:
                runtimes = loader(self.settings)
            except Exception as e:  # reported by /readyz; the process stays up to say why
                logger.exception("loading the policies failed")
                self.load_error = f"{type(e).__name__}: {e}"
                return
            by_device: dict[str, MicroBatcher] = {}
            for name, runtime in runtimes.items():
                device = str(getattr(runtime, "device", "cpu"))
                if device not in by_device:
                    by_device[device] = MicroBatcher(device, self.settings.max_wait_ms,
                                                     max(self.settings.batch_buckets), self.pending,
                                                     self.metrics.observe_batch)
                self.batchers[name] = by_device[device]
                self.metrics.warmup_seconds.labels(name).set(getattr(runtime, "warmup_s", 0.0))
            self.runtimes = runtimes
            self.ready = True
            self.metrics.ready.set(1)
            logger.info("ready: %d policies (%s) in %.1f s", len(runtimes), ", ".join(runtimes),
                        time.perf_counter() - start)

        thread = threading.Thread(target=run, name="policy-loader", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        """Stop the batch workers and report open episodes."""
        for batcher in {id(b): b for b in self.batchers.values()}.values():
            batcher.close()
        self.episodes.close()

    # ------------------------------------------------------------------ checks

    def check_ready(self) -> None:
        """ProtocolError not_ready while loading."""
        if not self.ready:
            if self.load_error:
                raise ProtocolError(ErrorCode.NOT_READY, f"loading the policies failed: {self.load_error}")
            raise ProtocolError(ErrorCode.NOT_READY, "policies are loading and compiling; retry shortly")

    def check_auth(self, request: Request) -> None:
        """ProtocolError unauthorized unless the bearer token matches (when one is configured)."""
        token = self.settings.token
        if token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        # compare_digest on bytes of both: constant time whatever the given token is.
        ok = hmac.compare_digest(given.strip().encode("utf-8", "replace"), token.encode())
        if scheme.lower() != "bearer" or not ok:
            raise ProtocolError(ErrorCode.UNAUTHORIZED,
                                "missing or wrong bearer token: send 'Authorization: Bearer <token>'")

    def resolve_policy(self, name: str | None) -> tuple[str, Any]:
        """(name, runtime) of the requested policy, or of the default one."""
        if name is None:
            name = self.settings.default_policy
            if name is None and len(self.runtimes) == 1:
                name = next(iter(self.runtimes))
            if name is None:
                raise ProtocolError(ErrorCode.MISSING_FIELD,
                                    f"several policies are loaded: give 'policy', one of {sorted(self.runtimes)}")
        runtime = self.runtimes.get(name)
        if runtime is None:
            raise ProtocolError(ErrorCode.UNKNOWN_POLICY,
                                f"no policy {name!r} is loaded; loaded: {sorted(self.runtimes)}")
        return name, runtime


# ----------------------------------------------------------------------------- request helpers


def is_msgpack(request: Request) -> bool:
    """Whether the request body (and so the answer) is MessagePack."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return content_type in MSGPACK_TYPES


def error_response(code: str, message: str, as_msgpack: bool, retryable: bool | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    """An `ErrorBody` answer with the status of its code."""
    status = protocol.STATUS_OF_CODE.get(code, 500)
    retry = status == 503 and code == ErrorCode.NOT_READY if retryable is None else retryable
    body = ErrorBody(code, message[:2000], retry).to_wire()
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    if as_msgpack:
        return Response(protocol.packb(body), status, headers, media_type=protocol.CONTENT_TYPE)
    return JSONResponse(body, status, headers)


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refusing (413) over `limit` bytes by Content-Length and while streaming."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise ProtocolError(ErrorCode.MALFORMED, f"bad Content-Length {declared[:40]!r}")
        if int(declared) > limit:
            raise ProtocolError(ErrorCode.PAYLOAD_TOO_LARGE,
                                f"body of {int(declared)} bytes is over the limit of {limit} bytes; "
                                "send images resized to the policy's size (see /v1/metadata)")
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise ProtocolError(ErrorCode.PAYLOAD_TOO_LARGE, f"body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_message(request: Request, state: ServerState) -> Any:
    """Auth, readiness, content type, size limit, then the decoded MessagePack body."""
    state.check_auth(request)
    state.check_ready()
    if not is_msgpack(request):
        given = request.headers.get("content-type", "none")
        raise ProtocolError(ErrorCode.UNSUPPORTED_MEDIA_TYPE,
                            f"Content-Type {given[:80]!r}: send MessagePack with "
                            f"Content-Type: {protocol.CONTENT_TYPE}")
    body = await read_body(request, state.settings.max_body_bytes)
    return protocol.unpackb(body, state.settings.max_body_bytes)


def protocol_error_response(request: Request, exc: ProtocolError) -> Response:
    """The 4xx (or 503) answer of a refused request."""
    return error_response(exc.code, exc.message, is_msgpack(request))


def fault_response(request: Request, exc: Exception) -> Response:
    """The 500 answer of a server fault, logged with its traceback."""
    logger.exception("internal error on %s %s", request.method, request.url.path)
    return error_response(ErrorCode.INTERNAL, f"internal server error ({type(exc).__name__})",
                          is_msgpack(request), retryable=True)


Endpoint = Callable[[Request], Any]  # async (Request) -> Response


class ServeApp(FastAPI):
    """FastAPI, with the robots' POSTs (`direct_posts`: path -> endpoint) answered without the middleware
    stack and the router: five layers of ASGI calls a request, ~0.2 ms of a one-robot round trip at 5 Hz
    on this project's CPU VM (docs/performance.md, `benchmarks/request_overhead.py`). They
    keep what those layers give them: the same error answers (`protocol_error_response`,
    `fault_response`) and the request counter.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.direct_posts: dict[str, Endpoint] = {}

    def add_direct_post(self, path: str, endpoint: Endpoint) -> None:
        """`endpoint` answers POSTs to `path` past the middleware stack and the router; the router keeps
        the route too, for other methods (405) and for the tests' in-process client."""
        self.add_route(path, endpoint, methods=["POST"])
        self.direct_posts[path] = endpoint

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        endpoint = self.direct_posts.get(scope["path"]) if scope["type"] == "http" else None
        if endpoint is None or scope["method"] != "POST":
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        request = Request(scope, receive)
        try:
            response = await endpoint(request)
        except ProtocolError as exc:
            response = protocol_error_response(request, exc)
        except Exception as exc:
            response = fault_response(request, exc)
        metrics = self.state.server.metrics
        metrics.child(metrics.requests, scope["path"], str(response.status_code)).inc()
        await response(scope, receive, send)


def msgpack_response(body: dict) -> Response:
    """A 200 MessagePack answer."""
    return Response(protocol.packb(body), 200, media_type=protocol.CONTENT_TYPE)


# ----------------------------------------------------------------------------- the app


def create_app(settings: ServeSettings, loader: Loader = load_runtimes) -> ServeApp:
    """The app; policies are loaded by `loader` in the background once it starts (lifespan)."""
    state = ServerState(settings, ServerMetrics(), GoalCache(settings.goal_cache_size),
                        EpisodeLog(settings.episode_idle_s))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        state.start_loading(loader)
        yield
        state.close()

    app = ServeApp(title="mqe-serve", version=str(protocol.SCHEMA_VERSION), lifespan=lifespan,
                   docs_url=None, redoc_url=None, openapi_url=None)
    app.state.server = state
    metrics = state.metrics

    # ------------------------------------------------------------------ errors: never a bare 500

    @app.exception_handler(ProtocolError)
    async def on_protocol_error(request: Request, exc: ProtocolError) -> Response:
        return protocol_error_response(request, exc)

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}.get(exc.status_code)
        if code is None:
            return JSONResponse(ErrorBody(ErrorCode.MALFORMED, str(exc.detail)).to_wire(), exc.status_code)
        return error_response(code, f"{request.method} {request.url.path}: {exc.detail}", is_msgpack(request))

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, exc: RequestValidationError) -> Response:
        return error_response(ErrorCode.MALFORMED, str(exc.errors())[:500], is_msgpack(request))

    @app.exception_handler(Exception)
    async def on_fault(request: Request, exc: Exception) -> Response:  # server faults only
        return fault_response(request, exc)

    app.add_middleware(RequestCounter, metrics=metrics)

    # ------------------------------------------------------------------ goals and actions
    # Plain Starlette routes, registered first (a request tries the routes in order): FastAPI's
    # route adds parameter solving we never use, ~0.15 ms per request on an idle server
    # (docs/performance.md, `benchmarks/server_cpu.py`). Errors still go through the
    # exception handlers above, and the request counter sees every answer.

    async def off_loop_if_large(size: int, fn: Callable[[], Any]) -> Any:
        # Decoding a big JPEG takes milliseconds: keep the loop free for the other robots.
        return await asyncio.to_thread(fn) if size > OFFLOAD_BYTES else fn()

    async def upload_goal(request: Request) -> Response:
        body = await read_message(request, state)
        goal_request = protocol.GoalRequest.from_wire(body)
        name, runtime = state.resolve_policy(goal_request.policy)
        # Encoding runs the goal half of the network: never on the event loop.
        goal = await asyncio.to_thread(runtime.encode_goal, goal_request.image)
        goal_id = state.goals.put(name, runtime.fingerprint, goal)
        metrics.goals_uploaded.labels(name).inc()
        logger.debug("goal %s uploaded for policy %s", goal_id, name)
        return msgpack_response(protocol.GoalResponse(goal_id).to_wire())

    async def act(request: Request) -> Response:
        start = time.perf_counter()
        # The announcement lets the batcher wait for this request to fill a batch.
        with state.pending.announced() as withdraw:
            body = await read_message(request, state)
            act_request = protocol.ActRequest.from_wire(body)
            name, runtime = state.resolve_policy(act_request.policy)
            size = int(request.headers.get("content-length") or 0)
            observation = await off_loop_if_large(size, lambda: runtime.prepare(act_request.image))
            if act_request.goal_id is not None:
                try:
                    goal = state.goals.get(act_request.goal_id, name)
                    metrics.child(metrics.goal_cache, "hit").inc()
                except ProtocolError:
                    metrics.child(metrics.goal_cache, "miss").inc()
                    raise
            else:
                goal = await asyncio.to_thread(runtime.encode_goal, act_request.goal_image)
            decoded = time.perf_counter()
            future = state.batchers[name].submit(runtime, observation, goal)
            withdraw()  # after the submit: a worker waiting for it finds it queued
            result = await asyncio.wrap_future(future)
        done = time.perf_counter()
        timing = protocol.Timing(decode_ms=(decoded - start) * 1000, infer_ms=(done - decoded) * 1000,
                                 total_ms=(done - start) * 1000)
        answer = protocol.ActResponse(result.action, result.distance, act_request.seq,
                                      runtime.fingerprint, timing)
        stage = metrics.stage_seconds
        metrics.child(stage, name, "decode").observe(decoded - start)
        metrics.child(stage, name, "queue").observe(result.queue_ms / 1000)
        metrics.child(stage, name, "compute").observe(result.compute_ms / 1000)
        metrics.child(stage, name, "total").observe(done - start)
        state.episodes.record(act_request.episode_id, name, timing.total_ms)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("act policy=%s episode=%s step=%s seq=%s batch=%d decode=%.2fms "
                         "queue=%.2fms compute=%.2fms total=%.2fms distance=%s", name,
                         act_request.episode_id, act_request.step, act_request.seq, result.batch_size,
                         timing.decode_ms, result.queue_ms, result.compute_ms, timing.total_ms,
                         result.distance)
        return msgpack_response(answer.to_wire())

    app.add_direct_post("/v1/act", act)
    app.add_direct_post("/v1/goals", upload_goal)
    add_openpi_route(app)  # openpi-client's websocket protocol at /

    # ------------------------------------------------------------------ probes and metadata

    @app.get("/healthz")
    async def healthz() -> Response:
        return JSONResponse({"status": "alive"})

    @app.get("/readyz")
    async def readyz() -> Response:
        state.check_ready()
        return JSONResponse({"status": "ready", "policies": sorted(state.runtimes)})

    @app.get("/metrics")
    async def metrics_endpoint(request: Request) -> Response:
        state.check_auth(request)
        metrics.goal_cache_entries.set(len(state.goals))
        return Response(metrics.render(), media_type=METRICS_CONTENT_TYPE)

    @app.get("/v1/metadata")
    async def metadata(request: Request) -> Response:
        state.check_auth(request)
        state.check_ready()
        default = settings.default_policy or (next(iter(state.runtimes)) if len(state.runtimes) == 1 else None)
        policies = [{"name": name, **runtime.metadata} for name, runtime in state.runtimes.items()]
        return JSONResponse({"schema_version": protocol.SCHEMA_VERSION, "default_policy": default,
                             "policies": policies})

    return app


KNOWN_PATHS = frozenset(["/healthz", "/readyz", "/metrics", "/v1/metadata", "/v1/goals", "/v1/act"])


class RequestCounter:
    """ASGI middleware counting answers by endpoint and status.

    Written against ASGI directly: Starlette's `@app.middleware("http")` runs every request in an
    extra task with two memory streams, which was a quarter of the server's CPU per /v1/act.
    """

    def __init__(self, app: Any, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics  # its `requests` Counter is labelled (endpoint, status)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        endpoint = scope["path"] if scope["path"] in KNOWN_PATHS else "other"
        started = False

        async def send_counted(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                self.metrics.child(self.metrics.requests, endpoint, str(message["status"])).inc()
            await send(message)

        try:
            await self.app(scope, receive, send_counted)
        except Exception:  # answered as a 500 by the outermost error handler
            if not started:
                self.metrics.child(self.metrics.requests, endpoint, "500").inc()
            raise


def json_dumps(obj: Any) -> str:
    """Compact JSON (used by the CLI for its startup line)."""
    return json.dumps(obj, separators=(",", ":"))
