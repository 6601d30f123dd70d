"""Control-loop timing: N steps at --hz on the twin against a server; deadline misses, jitter, latency.

    python benchmarks/control_loop.py --steps 1000                       # starts the mock server
    python benchmarks/control_loop.py --steps 1000 --server http://127.0.0.1:8000   # a real server

Runs the same ControlLoop as `mqe-robot` (observe, resize, /v1/act on a worker with its deadline,
safety path, sim apply, step log, video thread) and reads the figures back from steps.jsonl.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mqe_client.client import PolicyClient, check_metadata  # noqa: E402
from mqe_client.images import preprocess_image  # noqa: E402
from robot_client import safety  # noqa: E402
from robot_client.loop import ControlLoop, LoopSettings  # noqa: E402
from robot_client.records import TrialRecord, read_steps  # noqa: E402
from robot_client.robots.sim import WidowXSim  # noqa: E402


def _wait_ready(client: PolicyClient, timeout_s: float = 20.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if client.ready():
            return
        time.sleep(0.1)
    raise SystemExit("server did not become ready")


def pct(values: list[float], q: float) -> float:
    """Percentile q of values (nan if empty)."""
    return float(np.percentile(values, q)) if values else float("nan")


def summarize(steps: list[dict], period_s: float) -> dict:
    """Deadline misses, start lateness, period jitter and the latency breakdown of a step log."""
    starts = np.array([s["t"] + s["lateness_ms"] / 1000 for s in steps])
    periods = np.diff(starts)
    jitter_ms = np.abs(periods - period_s) * 1000
    out = {
        "steps": len(steps),
        "deadline_misses": sum(1 for s in steps if s["flags"].get("deadline_miss")),
        "holds": sum(1 for s in steps if s["flags"].get("held")),
        "period_jitter_ms": {"p50": pct(list(jitter_ms), 50), "p99": pct(list(jitter_ms), 99),
                             "max": float(jitter_ms.max()) if len(jitter_ms) else float("nan")},
        "start_lateness_ms": {"p50": pct([s["lateness_ms"] for s in steps], 50),
                              "p99": pct([s["lateness_ms"] for s in steps], 99)},
    }
    for key in ("observe_ms", "request_ms", "round_trip_ms", "dispatch_ms", "step_ms", "frame_age_ms"):
        vals = [s[key] for s in steps if s.get(key) is not None]
        out[key] = {"p50": pct(vals, 50), "p99": pct(vals, 99)}
    server = [s["server_ms"]["total_ms"] for s in steps if s.get("server_ms")]
    out["server_total_ms"] = {"p50": pct(server, 50), "p99": pct(server, 99)}
    return out


def main() -> None:
    """Run the benchmark and print a JSON summary."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--hz", type=float, default=5.0)
    p.add_argument("--server", default=None, help="a running server; default: start the mock server")
    p.add_argument("--policy", default=None)
    p.add_argument("--out", type=Path, default=None, help="keep the trial record here")
    a = p.parse_args()
    root = Path(__file__).resolve().parents[1]
    mock = None
    server = a.server
    if server is None:
        port = 18765
        mock = subprocess.Popen([sys.executable, "-m", "mqe_client.mock_server", "--port", str(port)],
                                cwd=root, stdout=subprocess.DEVNULL)
        server = f"http://127.0.0.1:{port}"
    settings = LoopSettings(hz=a.hz, max_steps=a.steps, request_deadline_s=0.75 / a.hz,
                            max_consecutive_failures=10**9)
    out_dir = a.out or Path(tempfile.mkdtemp(prefix="control_loop_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        with PolicyClient(server, timeout_s=settings.request_deadline_s) as client:
            _wait_ready(client)
            meta = client.metadata()
            info = check_metadata(meta, a.policy, safety.ACTION_NAMES)
            with WidowXSim(task="single_pnp", seed=0) as robot:
                robot.reset(0)
                client.set_goal(preprocess_image(robot.goal_image(max(info.image_size)), *info.image_size), info.name)
                record = TrialRecord(out_dir, 1, {"benchmark": "control_loop", "server": server})
                record.start_video(robot.camera, 10.0)
                loop = ControlLoop(robot, robot.camera, client, settings, info.image_size, info.fingerprint,
                                   threading.Event())
                outcome = loop.run(record, "benchmark")
                record.finish(status=outcome.status, reason=outcome.reason)
    finally:
        if mock is not None:
            mock.terminate()
            mock.wait()
    summary = summarize(read_steps(out_dir / "steps.jsonl"), 1.0 / a.hz)
    summary.update(server=server if a.server else "mock (mqe_client.mock_server)", policy=info.name,
                   algorithm=info.algorithm, machine=f"{platform.processor() or platform.machine()}, "
                   f"{platform.python_version()}", record=str(out_dir), status=outcome.status)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
