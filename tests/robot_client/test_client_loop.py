"""End-to-end trials on the twin against a server process on loopback: timing, records, failures.

The server here is `mqe_client.mock_server` (wire protocol v1, no model), started as a real
process so that killing and restarting it is a real crash and a real restart.
"""

from __future__ import annotations

import csv
import json
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from robot_client import run, safety
from robot_client.records import read_steps

pytest.importorskip("mujoco")

PERIOD = 0.2


def run_client(tmp_path: Path, server_url: str, *extra: str) -> tuple[int, Path]:
    """Run one sim trial through the CLI entry point; returns (exit code, trial directory)."""
    out = tmp_path / "runs"
    rc = run.main(["--task", "single_pnp", "--robot", "sim", "--server", server_url, "--no-prompt",
                   "--out", str(out), "--operator", "test", *extra])
    trials = sorted(out.glob("*/*/single_pnp/trial_*"))
    return rc, (trials[-1] if trials else None)


def load(trial: Path) -> tuple[dict, list[dict]]:
    """meta.json and the steps of a trial."""
    return json.loads((trial / "meta.json").read_text()), read_steps(trial / "steps.jsonl")


def test_trial_runs_at_5hz_and_writes_a_complete_record(tmp_path, mock_server):
    server = mock_server()
    rc, trial = run_client(tmp_path, server.url, "--max-steps", "12")
    assert rc == 0
    meta, steps = load(trial)
    assert meta["status"] == "completed" and meta["reason"] is None
    assert meta["policy_fingerprint"] and meta["server_metadata"]["schema_version"] == 1
    assert meta["goal_sha256"] and meta["client_version"] and "config" in meta and meta["operator"] == "test"
    assert meta["config"]["token"] is None
    assert len(steps) == 12 and [s["step"] for s in steps] == list(range(12))
    # 5 Hz on schedule. A shared CI machine may stall the client or the mock server once; the loop
    # must then show it (a late reply is a hold, a late step a deadline miss), never hide it.
    counters = meta["counters"]
    assert counters["holds"] + counters["deadline_misses"] <= 1
    held = [s for s in steps if s["flags"].get("held")]
    assert len(held) == counters["holds"] and all(s.get("error") for s in held)
    periods = np.diff([s["t"] + s["lateness_ms"] / 1000 for s in steps])
    assert abs(np.median(periods) - PERIOD) < 0.002
    assert np.mean(np.abs(periods - PERIOD) < 0.02) >= 0.9
    for s in steps:
        answered = () if s in held else ("raw_action", "executed_action", "distance", "server_ms",
                                         "round_trip_ms")
        for key in ("frame_age_ms", "observe_ms", "request_budget_ms", "request_ms", "dispatch_ms", "flags", "seq",
                    *answered):
            assert key in s, key
    assert (trial / "goal.png").stat().st_size > 0
    assert (trial / "video.avi").stat().st_size > 0 and meta["video_frames"] >= 10
    with open(trial / "video_timestamps.csv") as f:
        assert len(list(csv.DictReader(f))) == meta["video_frames"]
    sheet = list(csv.DictReader(open(trial.parents[3] / trial.parts[-4] / "sheet.csv")))
    assert len(sheet) == 1 and sheet[0]["trial"] == "1" and sheet[0]["policy"] == "mock"
    assert (trial.parents[3] / trial.parts[-4] / sheet[0]["trial_dir"]).resolve() == trial.resolve()


def test_server_killed_mid_trial_holds_within_a_period_and_aborts(tmp_path, mock_server):
    server = mock_server()
    killing: list[float] = []  # when the kill began and when the process was gone

    def kill() -> None:
        killing.append(time.time())
        server.kill()
        killing.append(time.time())

    timer = threading.Timer(1.1, kill)
    timer.start()
    rc, trial = run_client(tmp_path, server.url, "--max-steps", "30", "--max-consecutive-failures", "3")
    timer.join()
    assert rc == 0
    meta, steps = load(trial)
    assert meta["status"] == "aborted" and "3 steps in a row" in meta["reason"]
    began, gone = killing
    held = [s for s in steps if s["flags"].get("held")]
    assert held == steps[-3:]  # aborted after K failures in a row, not at max-steps
    assert held[0]["unix_time"] > began - PERIOD  # a step starts before the kill only if it was still in flight
    assert all(s["flags"].get("held") for s in steps if s["unix_time"] > gone)
    assert held[0]["unix_time"] - gone <= PERIOD + 0.02  # held within one period
    assert steps[:-3] and all("executed_action" in s for s in steps[:-3])
    # the arm did not move while held: the tip stays where the last applied action left it
    held_xyz = np.array([s["ee_xyz"] for s in held])
    assert np.abs(held_xyz - held_xyz[0]).max() < 2e-3


def test_server_restart_reuploads_the_goal_and_the_trial_continues(tmp_path, mock_server):
    server = mock_server()

    def restart() -> None:
        server.kill()
        server.start()  # same port, empty goal cache

    timer = threading.Timer(0.9, restart)
    timer.start()
    rc, trial = run_client(tmp_path, server.url, "--max-steps", "20", "--max-consecutive-failures", "15")
    timer.join()
    assert rc == 0
    meta, steps = load(trial)
    assert meta["status"] == "completed", meta["reason"]
    reuploads = [s["step"] for s in steps if s["flags"].get("goal_reuploaded")]
    assert len(reuploads) == 1 and meta["counters"]["goal_reuploads"] == 1
    assert meta["goal_uploads"] == 2
    assert all("executed_action" in s for s in steps if s["step"] >= reuploads[0])
    assert len(steps) == 20


@pytest.mark.parametrize("mode", ["nan", "inf", "late", "stale", "wrong_dim"])
def test_bad_answers_never_move_the_arm(tmp_path, mock_server, mode):
    server = mock_server("--mode", mode, "--delay-s", "0.5")
    rc, trial = run_client(tmp_path, server.url, "--max-steps", "5", "--max-consecutive-failures", "4")
    assert rc == 0
    meta, steps = load(trial)
    assert meta["status"] == "aborted"
    assert meta["counters"]["actions_applied"] == 0 and meta["counters"]["holds"] >= 4
    assert all(s["flags"].get("held") and "executed_action" not in s for s in steps)
    xyz = np.array([s["ee_xyz"] for s in steps])
    assert np.abs(xyz - safety.RESET_XYZ).max() < 2e-3
    if mode == "late":  # the loop kept its schedule while the server dawdled
        c = meta["counters"]
        # late answers, then (the request timed out) a short backoff: every step held, none overran;
        # the first step is late, never a failed request (its socket outlasts the loop's deadline)
        assert steps[0]["flags"].get("late") and not steps[0]["flags"].get("request_failed")
        assert c["late"] >= 1 and c["late"] + c["request_failures"] == len(steps)
        # the wait for the answer ends at its budget (allowing a loaded machine's wake-up delay), so a
        # step may overrun its period only through the time outside the request (start, render, hold)
        period_ms = 200.0
        for s in steps:
            assert s["request_budget_ms"] <= 150.0 and s["request_ms"] <= s["request_budget_ms"] + 25.0, s
            if s["flags"].get("deadline_miss"):
                outside_request = s["lateness_ms"] + s["observe_ms"] + s["dispatch_ms"]
                assert outside_request + s["request_budget_ms"] > period_ms, s
        assert c["deadline_misses"] == sum(bool(s["flags"].get("deadline_miss")) for s in steps)
    if mode == "stale":
        assert meta["counters"]["stale"] == len(steps)


def test_huge_actions_are_clipped_to_the_step_bounds_and_the_workspace(tmp_path, mock_server):
    server = mock_server("--mode", "huge")
    rc, trial = run_client(tmp_path, server.url, "--max-steps", "8")
    assert rc == 0
    meta, steps = load(trial)
    assert meta["counters"]["clipped"] == 8
    for s in steps:
        executed = np.array(s["executed_action"])
        assert np.all(np.abs(executed[:3]) <= safety.MAX_DELTA_XYZ + 1e-9)
        assert np.all(np.abs(executed[3:6]) <= safety.MAX_DELTA_RPY + 1e-9)
        target = np.array(s["target_xyz"])
        assert np.all(target >= safety.WORKSPACE_LOW - 1e-9) and np.all(target <= safety.WORKSPACE_HIGH + 1e-9)
    xyz = np.array([s["ee_xyz"] for s in steps])
    # the arm itself: each step moves at most the clipped delta (plus tracking error) and stays inside
    assert np.all(np.abs(np.diff(xyz, axis=0)) <= safety.MAX_DELTA_XYZ + 0.01)
    assert np.all(xyz >= safety.WORKSPACE_LOW - 0.01) and np.all(xyz <= safety.WORKSPACE_HIGH + 0.01)


def test_dry_run_queries_the_server_and_never_moves_the_arm(tmp_path, mock_server):
    server = mock_server()
    rc, trial = run_client(tmp_path, server.url, "--max-steps", "5", "--dry-run")
    assert rc == 0
    meta, steps = load(trial)
    assert meta["counters"]["actions_applied"] == 0 and all(s["flags"]["dry_run"] for s in steps)
    assert all("executed_action" in s for s in steps)  # what would have been sent is logged
    xyz = np.array([s["ee_xyz"] for s in steps])
    assert np.abs(xyz - safety.RESET_XYZ).max() < 1e-6
    assert not (trial.parents[3] / trial.parts[-4] / "sheet.csv").exists()  # dry runs are not scored


def test_ctrl_c_holds_at_once_and_ends_the_trial_as_aborted(tmp_path, mock_server):
    import _thread

    server = mock_server()
    # earlier tests (an in-process server) may have replaced the SIGINT handler; a terminal's Ctrl-C
    # reaches mqe-robot with Python's default one
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    def ctrl_c_after_three_steps() -> None:  # counted in the log, not timed: start-up varies with load
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            logs = list(tmp_path.glob("runs/**/steps.jsonl"))
            if logs and len(logs[0].read_text().splitlines()) >= 3:
                break
            time.sleep(0.01)
        _thread.interrupt_main()  # what Ctrl-C does to the main thread

    interrupter = threading.Thread(target=ctrl_c_after_three_steps)
    interrupter.start()
    try:
        rc, trial = run_client(tmp_path, server.url, "--max-steps", "30")
    finally:
        interrupter.join()
        signal.signal(signal.SIGINT, previous)
    assert rc == 0
    meta, steps = load(trial)
    assert meta["status"] == "aborted" and "Ctrl-C" in meta["reason"]
    assert 3 <= len(steps) < 10 and meta["counters"]["holds"] >= 1
    assert "aborted" in meta["score"]["notes"]


def test_estop_key_holds_and_aborts(tmp_path, mock_server):
    """The e-stop key sets the loop's stop event (robot_client.operator.estop_listener)."""
    from mqe_client.client import PolicyClient, check_metadata
    from robot_client.loop import ControlLoop, LoopSettings
    from robot_client.records import TrialRecord
    from robot_client.robots.sim import WidowXSim

    server = mock_server()
    stop = threading.Event()
    with PolicyClient(server.url) as client, WidowXSim() as robot:
        info = check_metadata(client.metadata(), None, safety.ACTION_NAMES)
        robot.reset(0)
        client.set_goal(robot.goal_image(128), info.name)
        record = TrialRecord(tmp_path, 1, {})
        threading.Timer(0.5, stop.set).start()
        started = time.monotonic()
        outcome = ControlLoop(robot, robot.camera, client, LoopSettings(max_steps=50), info.image_size,
                              info.fingerprint, stop).run(record, "ep")
        record.finish(status=outcome.status)
    assert outcome.status == "aborted" and "e-stop" in outcome.reason
    assert time.monotonic() - started < 0.5 + PERIOD + 0.1  # within one period of the key


def test_ctrl_c_without_prompts_stops_the_series(tmp_path, mock_server, capsys):
    """With --no-prompt nobody is asked before the next trial: Ctrl-C ends the run, recorded."""
    import _thread

    server = mock_server()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, _thread.interrupt_main)
    timer.start()
    try:
        rc, trial = run_client(tmp_path, server.url, "--max-steps", "30", "--trials", "3")
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert rc == 0 and trial.name == "trial_1" and not (trial.parent / "trial_2").exists()
    assert load(trial)[0]["status"] == "aborted"
    assert "stopped after trial 1 (Ctrl-C); 2 trial(s) not run" in capsys.readouterr().out
