"""Faults end the trial as aborted with one line and an intact record (the fake WidowX, real time)."""

from __future__ import annotations

import numpy as np
import pytest
from fake_interbotix import FakeWorld
from widowx_helpers import StillCamera, connected, run_trial

from robot_client.camera import size_mismatch
from robot_client.robots.widowx_faults import (
    BRIDGE_EFFORT_LIMITS_MA,
    FaultLimits,
    describe_hardware_error,
    effort_fault,
    motor_status_fault,
)

MOTORS = ["waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate", "gripper"]


@pytest.fixture
def world():
    w = FakeWorld(ros=2)
    yield w
    w.close()


def up_and_down(step: int) -> np.ndarray:
    """3 cm up per step, then down again, gripper open: brisk motion, no contact."""
    return np.array([0, 0, 0.03 if step % 8 < 4 else -0.03, 0, 0, 0, 1.0])


def check_aborted_record(outcome, steps, reason_start: str) -> str:
    """The outcome, the step log's last line and the earlier lines agree; returns the reason."""
    assert outcome.status == "aborted" and outcome.reason.startswith(reason_start), outcome.reason
    last = steps[-1]
    assert last["flags"] == {"fault": True, "held": True} and last["error"] == outcome.reason
    assert [s["step"] for s in steps] == list(range(len(steps)))  # nothing lost before the fault
    assert outcome.counters.steps == len(steps) and "\n" not in outcome.reason
    return outcome.reason


def test_fault_lines():
    assert describe_hardware_error(32) == "overload" and describe_hardware_error(36) == "overheating, overload"
    assert motor_status_fault([0] * 7, MOTORS) is None
    assert motor_status_fault([0, 0, 32, 0, 0, 0, 0], MOTORS).startswith("motor error on elbow: overload (")
    assert motor_status_fault([0, 0, 0], MOTORS).startswith("motor forearm_roll does not answer")
    assert effort_fault([0, 1700, 0, 0, 0, 0], BRIDGE_EFFORT_LIMITS_MA, MOTORS[:6]) is None  # at the limit
    assert effort_fault([0, -1701, 0, 0, 0, 0], BRIDGE_EFFORT_LIMITS_MA, MOTORS[:6]).startswith(
        "joint shoulder effort 1701 mA over its limit 1700 mA")
    with pytest.raises(ValueError, match="status poll period 1.0 s must be in"):
        FaultLimits(driver_timeout_s=0.5, status_poll_s=1.0)


def test_brisk_motion_stays_under_the_effort_limits(monkeypatch, world, tmp_path):
    robot = connected(monkeypatch, world)
    outcome, steps = run_trial(robot, tmp_path, up_and_down, steps=16)
    assert outcome.status == "completed" and len(steps) == 16


def test_a_load_over_the_effort_limit_aborts_and_the_arm_goes_to_the_safe_pose(monkeypatch, world, tmp_path):
    robot = connected(monkeypatch, world, reset_time_s=1.0)

    def on_step(rec, frame):
        if rec["step"] == 3:
            world.driver.load("shoulder", 1500.0)  # pressing on the table: 450 holding + 1500

    outcome, steps = run_trial(robot, tmp_path, up_and_down, steps=30, on_step=on_step)
    reason = check_aborted_record(outcome, steps, "joint shoulder effort ")
    assert reason.endswith("mA over its limit 1700 mA (blocked or colliding?): free the arm, check the scene, then rerun")
    assert len(steps) == 5
    names = [name for name, _ in world.bot.arm.log]
    assert names[-2:] == ["set_joint_positions", "set_ee_pose_matrix"]  # the safe pose's two legs
    hold = [call for name, call in world.bot.arm.log if name == "set_joint_positions"][-2]
    assert hold["blocking"] is False and hold["ok"]  # the hold came first, at once


@pytest.mark.parametrize(("inject", "reason"), [
    (lambda d: d.fault("wrist_angle", 32), "motor error on wrist_angle: overload ("),
    (lambda d: d.silent_motors.add(6), "motor gripper does not answer (its status read failed)"),
])
def test_a_motor_error_aborts(monkeypatch, world, tmp_path, inject, reason):
    robot = connected(monkeypatch, world)

    def on_step(rec, frame):
        if rec["step"] == 2:
            inject(world.driver)

    outcome, steps = run_trial(robot, tmp_path, steps=40, on_step=on_step, abort_pose="hold")
    check_aborted_record(outcome, steps, reason)
    assert len(steps) < 15  # the status is polled every 0.25 s: found within a few 0.1 s steps


@pytest.mark.parametrize("ros", [2, 1])
def test_a_driver_gone_mid_trial_aborts_and_nothing_waits_on_it(monkeypatch, tmp_path, caplog, ros):
    w = FakeWorld(ros=ros)
    try:
        robot = connected(monkeypatch, w, faults=FaultLimits(driver_timeout_s=0.4, status_poll_s=0.1))

        def on_step(rec, frame):
            if rec["step"] == 2:
                w.driver.stop()

        outcome, steps = run_trial(robot, tmp_path, steps=40, on_step=on_step)  # abort_pose reset
        reason = check_aborted_record(outcome, steps, "")
        assert reason.startswith(("no joint states from the arm's driver for ",
                                  "the arm's driver has not answered a motor status read"))
        assert len(steps) < 12
        robot.park()  # shutting down: nothing to move, nothing hangs
        robot.close()
        gone = [r.getMessage() for r in caplog.records if "the arm's driver is gone" in r.getMessage()]
        assert [m.split(":")[0] for m in gone] == ["no safe pose", "no sleep pose"]
    finally:
        w.close()


def test_a_stale_camera_frame_aborts(monkeypatch, world, tmp_path):
    robot = connected(monkeypatch, world)
    camera = StillCamera()

    def on_step(rec, frame):
        if rec["step"] == 3:
            camera.age_s = 0.8

    outcome, steps = run_trial(robot, tmp_path, camera=camera, steps=20, on_step=on_step, abort_pose="hold")
    reason = check_aborted_record(outcome, steps, "camera frame 800 ms old (limit 500 ms): ")
    assert len(steps) == 5 and "v4l2-ctl --list-devices" in reason


def test_a_camera_that_changes_its_frame_size_aborts(monkeypatch, world, tmp_path):
    robot = connected(monkeypatch, world)
    camera = StillCamera()

    def on_step(rec, frame):
        if rec["step"] == 1:
            camera.shape = (720, 1280)

    outcome, steps = run_trial(robot, tmp_path, camera=camera, steps=20, on_step=on_step, abort_pose="hold")
    check_aborted_record(outcome, steps, size_mismatch("test-camera", (720, 1280, 3), (480, 640)))
    assert len(steps) == 3
