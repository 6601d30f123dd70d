"""Trials on the twin against the real inference server (`python -m server`) on loopback.

The checkpoint is an untrained tiny MQE with an IMPALA encoder on 32x32 images, written by the
server's own `server.random_checkpoint`: the protocol, timing and failure handling do not depend
on what the weights learned. The server runs JAX in its own process; this one never imports it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from client_helpers import REPO, free_port

from robot_client import run
from robot_client.records import read_steps

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None or importlib.util.find_spec("fastapi") is None,
                                reason="the real server needs the train and serve extras")
PERIOD = 0.2


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """An untrained tiny image checkpoint (32x32), written once for this module."""
    workdir = tmp_path_factory.mktemp("ckpt")
    subprocess.run([sys.executable, "-m", "server.random_checkpoint", "--out", str(workdir), "--preset", "tiny",
                    "--set", "encoder=impala_tiny", "--image-size", "32"], cwd=REPO, check=True,
                   env={**os.environ, "JAX_PLATFORMS": "cpu"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return workdir


class RealServer:
    """`python -m server` with one policy; start() waits for /readyz."""

    def __init__(self, checkpoint: Path, cache: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = [sys.executable, "-m", "server", "--policy", f"mqe={checkpoint}", "--port", str(self.port),
                     "--compilation-cache", str(cache), "--batch-buckets", "1"]
        self.proc: subprocess.Popen | None = None

    def start(self) -> RealServer:
        self.proc = subprocess.Popen(self.args, cwd=REPO, env={**os.environ, "JAX_PLATFORMS": "cpu"},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 90
        while time.monotonic() < end:
            assert self.proc.poll() is None, "the server exited"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return self
            time.sleep(0.1)
        raise TimeoutError("the server did not become ready")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def real_server(checkpoint, tmp_path_factory):
    server = RealServer(checkpoint, tmp_path_factory.getbasetemp() / "jax-cache").start()
    yield server
    server.kill()


def trial(tmp_path: Path, url: str, *extra: str) -> tuple[dict, list[dict]]:
    out = tmp_path / "runs"
    assert run.main(["--task", "single_pnp", "--robot", "sim", "--server", url, "--no-prompt", "--out", str(out),
                     *extra]) == 0
    (path,) = out.glob("*/mqe/single_pnp/trial_*")
    return json.loads((path / "meta.json").read_text()), read_steps(path / "steps.jsonl")


def test_trial_against_the_real_server(tmp_path, real_server):
    meta, steps = trial(tmp_path, real_server.url, "--max-steps", "12")
    assert meta["status"] == "completed" and len(steps) == 12
    assert meta["counters"]["holds"] == 0 and meta["counters"]["deadline_misses"] == 0
    assert meta["image_size"] == [32, 32] and len(meta["policy_fingerprint"]) == 64
    assert all(isinstance(s["distance"], float) and s["server_ms"]["infer_ms"] > 0 for s in steps)
    starts = np.array([s["t"] + s["lateness_ms"] / 1000 for s in steps])
    assert np.allclose(np.diff(starts), PERIOD, atol=0.02)


def test_real_server_killed_then_restarted(tmp_path, real_server):
    """Killed: the arm holds from the next step; restarted (empty goal cache): the goal is
    re-uploaded and the trial goes on to complete."""
    events: dict[str, float] = {}

    def crash_and_restart() -> None:
        real_server.kill()
        # Dead: no step from here on can be answered until the new process could answer, which
        # takes longer than 0.5 s (importing JAX alone does).
        events["killed"] = time.time()
        events["restarting"] = events["killed"] + 0.5
        real_server.start()
        events["ready"] = time.time()

    timer = threading.Timer(1.0, crash_and_restart)
    timer.start()
    # 150 steps (30 s at 5 Hz): on a loaded 2-core machine the restart outlasted 60 steps (12 s), and the
    # trial ended held, before the new server could ask for the goal again.
    meta, steps = trial(tmp_path, real_server.url, "--max-steps", "150", "--max-consecutive-failures", "150")
    timer.join()
    assert meta["status"] == "completed", meta["reason"]
    down = [s for s in steps if events["killed"] < s["unix_time"] < events["restarting"]]
    assert down and all(s["flags"].get("held") for s in down)
    assert down[0]["unix_time"] - events["killed"] <= PERIOD + 0.02
    reuploaded = [s for s in steps if s["flags"].get("goal_reuploaded")]
    assert len(reuploaded) == 1 and meta["goal_uploads"] == 2
    after = [s for s in steps if s["step"] >= reuploaded[0]["step"]]
    assert after and all("executed_action" in s for s in after)


def test_real_server_killed_aborts_the_trial(tmp_path, real_server):
    timer = threading.Timer(1.0, real_server.kill)
    timer.start()
    meta, steps = trial(tmp_path, real_server.url, "--max-steps", "40", "--max-consecutive-failures", "3")
    timer.join()
    assert meta["status"] == "aborted" and "3 steps in a row" in meta["reason"]
    assert [s["flags"].get("held", False) for s in steps[-3:]] == [True] * 3
