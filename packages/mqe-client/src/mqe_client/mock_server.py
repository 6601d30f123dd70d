"""A protocol-v1 stand-in for the inference server, for tests, benchmarks and rehearsals.

Stdlib `http.server` plus `mqe_client.protocol` only (no model, no FastAPI), so it starts in well under
a second. It answers like the real server (same endpoints, bodies and error codes) with actions
chosen by `--mode`, including the bad ones the client must survive:

    ok      small bounded moves (a slow circle), distance counting down
    nan     actions full of NaN          inf     actions with inf
    huge    actions of 1e6               late    correct actions after --delay-s
    stale   a seq that is not the request's  wrong_dim  a 6-d action

    mqe-mock-server --port 8765 --mode ok
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
    Timing,
    packb,
    unpackb,
)

logger = logging.getLogger(__name__)

MODES = ("ok", "nan", "inf", "huge", "late", "stale", "wrong_dim")
FINGERPRINT = "0" * 56 + "6d6f636b"  # "mock" at the end: never mistaken for a real policy


def make_metadata(image_size: int | None = 128, action_dim: int = 7, schema_version: int = SCHEMA_VERSION,
                  name: str = "mock") -> dict:
    """A /v1/metadata document for one policy."""
    return {
        "schema_version": schema_version,
        "policies": [{
            "name": name, "algorithm": "mock", "step": 0, "fingerprint": FINGERPRINT,
            "image": None if image_size is None else {"height": image_size, "width": image_size, "resize": "area"},
            "action_dim": action_dim,
            "action_names": ["dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper"] if action_dim == 7 else None,
            "action_low": [-0.05] * 3 + [-0.25] * 3 + [0.0], "action_high": [0.05] * 3 + [0.25] * 3 + [1.0],
            "control_hz": 5.0,
        }],
    }


class MockPolicyServer(ThreadingHTTPServer):
    """The HTTP server object: holds the mode, the goal cache and the request counts."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], mode: str = "ok", delay_s: float = 0.5,
                 token: str | None = None, metadata: dict | None = None):
        super().__init__(address, _Handler)
        self.mode, self.delay_s, self.token = mode, delay_s, token
        self.metadata = metadata or make_metadata()
        self.goals: dict[str, np.ndarray | bytes] = {}
        self.acts = 0
        self.lock = threading.Lock()

    def handle_error(self, request, client_address) -> None:
        """A client that gave up on a late answer closes its socket: not worth a traceback."""
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            logger.debug("client %s went away", client_address)
            return
        super().handle_error(request, client_address)

    def action_for(self, step: int) -> np.ndarray:
        """The action the current mode answers at `step`."""
        if self.mode == "wrong_dim":
            return np.zeros(6, np.float32)
        if self.mode == "nan":
            return np.full(7, np.nan, np.float32)
        if self.mode == "inf":
            return np.array([np.inf, -np.inf, 0, 0, 0, 0, 1], np.float32)
        if self.mode == "huge":
            return np.array([1e6, -1e6, 1e6, 1e6, -1e6, 1e6, 1e6], np.float32)
        phase = 2 * math.pi * step / 40  # a slow circle of about 4 cm radius, within every bound
        return np.array([0.006 * math.cos(phase), 0.006 * math.sin(phase), 0.002 * math.sin(phase / 2),
                         0, 0, 0.02 * math.sin(phase), 1.0 if (step // 20) % 2 == 0 else 0.0], np.float32)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn does
    server: MockPolicyServer

    def log_message(self, fmt: str, *args) -> None:  # the default writes every request to stderr
        logger.debug(fmt, *args)

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, code: str, message: str, retryable: bool = False) -> None:
        self._send(status, packb(ErrorBody(code, message, retryable).to_wire()), CONTENT_TYPE)

    def _authorized(self) -> bool:
        if self.server.token and self.headers.get("Authorization") != f"Bearer {self.server.token}":
            self._error(401, ErrorCode.UNAUTHORIZED, "bad or missing bearer token")
            return False
        return True

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path == "/healthz" or self.path == "/readyz":
            self._send(200, b'{"status": "ok"}', "application/json")
        elif self.path == "/v1/metadata":
            if self._authorized():
                self._send(200, json.dumps(self.server.metadata).encode(), "application/json")
        else:
            self._send(404, b'{"error": {"code": "not_found", "message": "no such endpoint", "retryable": false}}',
                       "application/json")

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not self._authorized():
            return
        start = time.perf_counter()
        try:
            message = unpackb(body)
            if self.path == "/v1/goals":
                goal = GoalRequest.from_wire(message)
                goal_id = uuid.uuid4().hex
                with self.server.lock:
                    self.server.goals[goal_id] = goal.image
                self._send(200, packb(GoalResponse(goal_id).to_wire()), CONTENT_TYPE)
            elif self.path == "/v1/act":
                self._act(ActRequest.from_wire(message), start)
            else:
                self._error(404, "not_found", f"no endpoint {self.path}")
        except ProtocolError as e:
            self._error(422, e.code, e.message)

    def _act(self, req: ActRequest, start: float) -> None:
        srv = self.server
        if req.goal_image is None and req.goal_id not in srv.goals:
            self._error(404, ErrorCode.UNKNOWN_GOAL, f"goal_id {req.goal_id} is not cached: upload the goal again")
            return
        with srv.lock:
            srv.acts += 1
        step = req.step or 0
        if srv.mode == "late":
            time.sleep(srv.delay_s)
        seq = None if req.seq is None else (req.seq - 1 if srv.mode == "stale" else req.seq)
        total = (time.perf_counter() - start) * 1000
        reply = ActResponse(srv.action_for(step), float(max(0, 60 - step)), seq, FINGERPRINT,
                            Timing(decode_ms=0.05, infer_ms=0.1, total_ms=total))
        self._send(200, packb(reply.to_wire()), CONTENT_TYPE)


def serve(host: str = "127.0.0.1", port: int = 8765, mode: str = "ok", delay_s: float = 0.5,
          token: str | None = None, image_size: int | None = 128, action_dim: int = 7,
          schema_version: int = SCHEMA_VERSION) -> MockPolicyServer:
    """Build a server bound to (host, port); call serve_forever() on it (port 0 picks a free one)."""
    meta = make_metadata(image_size=image_size, action_dim=action_dim, schema_version=schema_version)
    return MockPolicyServer((host, port), mode=mode, delay_s=delay_s, token=token, metadata=meta)


def main(argv: list[str] | None = None) -> None:
    """CLI: run the mock server until killed."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--mode", choices=MODES, default="ok")
    p.add_argument("--delay-s", type=float, default=0.5, help="answer delay of --mode late (s)")
    p.add_argument("--token", default=None, help="require this bearer token")
    p.add_argument("--image-size", type=int, default=128, help="0: a state-based policy (image_size null)")
    p.add_argument("--action-dim", type=int, default=7)
    p.add_argument("--schema-version", type=int, default=SCHEMA_VERSION)
    a = p.parse_args(argv)
    srv = serve(a.host, a.port, a.mode, a.delay_s, a.token, a.image_size or None, a.action_dim, a.schema_version)
    print(f"mock policy server on http://{a.host}:{srv.server_address[1]} mode={a.mode}", flush=True)
    try:
        srv.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
