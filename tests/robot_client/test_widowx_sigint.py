"""Ctrl-C reaches the arm: a real `mqe-robot --robot widowx` process on the fake Interbotix gets SIGINT."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from client_helpers import REPO
from fake_interbotix import SLEEP
from widowx_helpers import wait_for

PROCESS = Path(__file__).with_name("widowx_process.py")


def start(tmp_path: Path, server_url: str, ros: int, *extra: str) -> subprocess.Popen:
    goal = tmp_path / "goal.png"
    cv2.imwrite(str(goal), np.zeros((64, 64, 3), np.uint8))
    args = ["--task", "single_pnp", "--robot", "widowx", "--camera", "0", "--goal", str(goal),
            "--server", server_url, "--no-prompt", "--out", str(tmp_path / "runs"), "--reset-time-s", "1.0",
            *extra]
    return subprocess.Popen([sys.executable, str(PROCESS), str(tmp_path / "report.json"), str(ros), "--", *args],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def steps_file(tmp_path: Path):
    found = list((tmp_path / "runs").glob("*/*/*/trial_1/steps.jsonl"))
    return found[0] if found else None


def written_steps(tmp_path: Path) -> int:
    path = steps_file(tmp_path)
    return 0 if path is None else path.read_text().count("\n")


@pytest.mark.parametrize("ros", [2, 1])
def test_ctrl_c_holds_then_goes_to_the_safe_pose_then_to_sleep(tmp_path, mock_server, ros):
    server = mock_server()
    frame = ("--action-frame", "previous_target") if ros == 1 else ()  # the policy says "measured"
    proc = start(tmp_path, server.url, ros, "--max-steps", "500", *frame)
    try:
        assert wait_for(lambda: written_steps(tmp_path) >= 3, timeout_s=30), proc.stdout.read() if proc.poll() else ""
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "trial 1: aborted (operator stop (Ctrl-C))" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert not report["signals_installed"]  # ROS never took SIGINT ...
    assert report["shutdown_reason"] == ("robot_shutdown()" if ros == 2 else "mqe-robot done")  # ... the client shut it
    meta = json.loads(steps_file(tmp_path).with_name("meta.json").read_text())
    assert meta["status"] == "aborted" and meta["reason"] == "operator stop (Ctrl-C)"
    assert (meta["action_frame"], meta["policy_action_frame"]) == (frame[1] if frame else "measured", "measured")
    assert meta["counters"]["steps"] < 500 and time.monotonic() - sent < 30
    calls = report["calls"]
    names = [name for name, _ in calls]
    # after the trial's steps: the hold, the safe pose's two legs, the sleep pose via the reset joints,
    # and the hold on the way out
    last_step = max(i for i, (name, call) in enumerate(calls) if name == "set_ee_pose_matrix" and not call["blocking"])
    after = calls[last_step + 1:]
    assert [name for name, _ in after] == ["set_joint_positions", "set_joint_positions", "set_ee_pose_matrix",
                                          "set_joint_positions", "go_to_sleep_pose", "set_joint_positions"], names
    hold, safe_joints, safe_refine, park_joints, sleep, _ = (call for _, call in after)
    assert hold["blocking"] is False and hold["ok"]
    assert safe_joints["moving_time"] == 1.0 and safe_joints["blocking"] and safe_joints["ok"] and safe_refine["ok"]
    assert park_joints["ok"] and sleep["moving_time"] == 1.0
    assert np.allclose(report["arm"], SLEEP, atol=0.02)


def test_ctrl_c_twice_holds_where_the_arm_is_and_skips_the_rest(tmp_path, mock_server):
    server = mock_server()
    proc = start(tmp_path, server.url, 2, "--max-steps", "500")
    try:
        assert wait_for(lambda: written_steps(tmp_path) >= 3, timeout_s=30)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)  # the loop has stopped; the safe pose's first 1 s leg is under way
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    report = json.loads((tmp_path / "report.json").read_text())
    names = [name for name, _ in report["calls"]]
    assert "go_to_sleep_pose" not in names  # no sleep pose after an insisted Ctrl-C
    assert names[-1] == "set_joint_positions" and report["calls"][-1][1]["blocking"] is False  # held
