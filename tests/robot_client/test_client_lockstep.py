"""`--pace lockstep`: trials on the twin without a wall clock, against server processes on loopback.

Each step waits for the server's answer and then steps the twin by one period of simulated time,
so the same seed and the same answers give the same trial whatever the server's latency.
"""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import pytest
from test_client_loop import PERIOD, load, run_client

pytest.importorskip("mujoco")


def test_lockstep_waits_for_slow_answers_instead_of_holding(tmp_path, mock_server):
    """A server slower than a period: realtime holds every step, lockstep applies every answer."""
    server = mock_server("--mode", "late", "--delay-s", "0.3")
    rc, trial = run_client(tmp_path, server.url, "--max-steps", "6", "--pace", "lockstep")
    assert rc == 0
    meta, steps = load(trial)
    assert meta["status"] == "completed" and meta["pace"] == "lockstep"
    c = meta["counters"]
    assert c["holds"] == 0 and c["late"] == 0 and c["deadline_misses"] == 0 and c["actions_applied"] == 6
    assert all(s["request_ms"] >= 290 and "executed_action" in s for s in steps)
    assert [s["t"] for s in steps] == pytest.approx([i * PERIOD for i in range(6)])  # the twin's clock
    assert all(s["lateness_ms"] is None for s in steps) and steps[-1]["wall_s"] >= 5 * 0.3


def test_lockstep_runs_faster_than_real_time_and_does_not_depend_on_latency(tmp_path, mock_server):
    fast, slow = mock_server(), mock_server("--mode", "late", "--delay-s", "0.05")
    rc, fast_trial = run_client(tmp_path / "fast", fast.url, "--max-steps", "30", "--pace", "lockstep",
                                "--seed", "3")
    assert rc == 0
    rc, slow_trial = run_client(tmp_path / "slow", slow.url, "--max-steps", "30", "--pace", "lockstep",
                                "--seed", "3")
    assert rc == 0
    (fast_meta, fast_steps), (slow_meta, slow_steps) = load(fast_trial), load(slow_trial)
    assert fast_meta["status"] == slow_meta["status"] == "completed"
    assert fast_steps[-1]["wall_s"] < 0.5 * 29 * PERIOD  # 30 real-time steps take 5.8 s
    # the same answers at another latency: the same trajectory and the same score
    np.testing.assert_array_equal([s["ee_xyz"] for s in fast_steps], [s["ee_xyz"] for s in slow_steps])
    assert fast_meta["score"]["points"] == slow_meta["score"]["points"]
    assert slow_steps[-1]["wall_s"] > fast_steps[-1]["wall_s"]


def test_lockstep_request_timeout_holds_and_aborts(tmp_path, mock_server):
    server = mock_server("--mode", "late", "--delay-s", "1.0")
    started = time.monotonic()
    rc, trial = run_client(tmp_path, server.url, "--max-steps", "20", "--pace", "lockstep",
                           "--request-timeout-s", "0.1", "--max-consecutive-failures", "3")
    assert rc == 0
    meta, steps = load(trial)
    assert meta["status"] == "aborted" and "3 steps in a row" in meta["reason"]
    assert len(steps) == 3 and all(s["flags"].get("held") for s in steps)
    assert time.monotonic() - started < 15


def test_lockstep_waits_out_a_lost_server_then_aborts(tmp_path, mock_server):
    """Killed mid-trial: held steps spaced by the client's backoff, not a burst of failures."""
    server = mock_server()
    timer = threading.Timer(1.0, server.kill)
    timer.start()
    rc, trial = run_client(tmp_path, server.url, "--max-steps", "100000", "--pace", "lockstep",
                           "--max-consecutive-failures", "5")
    timer.join()
    assert rc == 0
    meta, steps = load(trial)
    assert meta["status"] == "aborted" and "5 steps in a row" in meta["reason"]
    held = [s for s in steps if s["flags"].get("held")]
    assert len(held) == 5 and held == steps[-5:]
    # each retry waited for the backoff (50 ms doubling) after the failure before it: the failures
    # (step start + observe + request, the wait included) lie that far apart, however long the
    # observations took on a loaded machine
    failed_at = [s["unix_time"] * 1000 + s["observe_ms"] + s["request_ms"] for s in held]
    gaps = [later - earlier for earlier, later in itertools.pairwise(failed_at)]
    assert all(gap >= 0.9 * 50 * 2**i for i, gap in enumerate(gaps)), gaps
