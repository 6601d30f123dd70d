"""The WidowX backend against the timing-aware fake Interbotix (ROS 2 and ROS 1 flavours)."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest
from fake_interbotix import SLEEP, FakeWorld, VirtualClock, fk
from reset_sweep import STEP_TIME_S, sweep
from widowx_helpers import connected, install

from robot_client.robots import widowx
from robot_client.robots.interbotix import driver_absent
from robot_client.robots.widowx import (
    MISSING_INTERBOTIX,
    RESET_JOINTS,
    WidowXInterbotix,
    WidowXSettings,
    reset_pose_matrix,
)
from robot_client.transforms import GRIPPER_DOWN


@pytest.fixture
def world(request):
    made = []

    def make(**kwargs) -> FakeWorld:
        made.append(FakeWorld(**kwargs))
        return made[-1]

    yield make
    for w in made:
        w.close()


def test_missing_interbotix_is_one_clear_line(monkeypatch):
    for name in [n for n in sys.modules if n.startswith("interbotix")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "interbotix_xs_modules", None)  # import fails, as when absent
    with pytest.raises(RuntimeError) as e:
        WidowXInterbotix().connect()
    assert str(e.value) == MISSING_INTERBOTIX


def test_methods_before_connect_say_what_to_do():
    with pytest.raises(RuntimeError, match=r"WidowXInterbotix is not connected. Run .connect\(\) first."):
        WidowXInterbotix().observe()


def test_settings_refuse_what_the_arm_cannot_do():
    with pytest.raises(ValueError, match="robot model 'px100' has no known reset joints; the client drives wx250s"):
        WidowXSettings(robot_model="px100")
    with pytest.raises(ValueError, match="reset time 0.2 s must be >= 1 s"):
        WidowXSettings(reset_time_s=0.2)


def test_the_reset_joints_are_the_reset_pose_on_the_wx250s():
    pose = fk(RESET_JOINTS["wx250s"])
    assert np.allclose(pose[:3, 3], reset_pose_matrix()[:3, 3], atol=1e-4)
    assert np.allclose(pose[:3, :3], GRIPPER_DOWN, atol=1e-4)


@pytest.mark.parametrize("ros", [2, 1])
def test_ros_starts_without_its_signal_handlers(monkeypatch, world, ros):
    w = world(ros=ros)
    robot = connected(monkeypatch, w)
    expected = "rclpy.init(SignalHandlerOptions.NO)" if ros == 2 else \
        "rospy.init_node(mqe_robot_client, disable_signals=True)"
    assert w.events[0] == expected and not w.context.signals_installed
    assert w.bot.args == ("wx250s", "arm", "gripper")
    robot.close()
    assert w.events[-1:] == (["robot_shutdown"] if ros == 2 else [expected])


def test_interbotix_left_to_itself_installs_the_handlers_the_client_avoids(monkeypatch, world):
    """The fake bites: constructed the way Interbotix's own examples do, ROS takes SIGINT."""
    w = world(ros=2)
    install(monkeypatch, w)
    w.manipulator("wx250s")
    assert w.events[0] == "rclpy.init(None)" and w.context.signals_installed


@pytest.mark.parametrize("ros", [2, 1])
def test_steps_seed_ik_with_the_measured_joints_and_never_block(monkeypatch, world, ros):
    w = world(ros=ros, clock=VirtualClock())
    robot = connected(monkeypatch, w)
    robot.reset()
    arm = w.bot.arm
    assert arm.moving_time == STEP_TIME_S and arm.accel_time == STEP_TIME_S / 2  # the step's time is back
    target = reset_pose_matrix()
    target[:3, 3] += [0.02, 0.01, -0.01]
    result = robot.apply(target, 0.0)
    name, call = arm.log[-1]
    assert name == "set_ee_pose_matrix" and call["ok"] and not result.ik_failed
    assert np.array_equal(call["T"], target) and call["blocking"] is False
    assert (call["moving_time"], call["accel_time"]) == (STEP_TIME_S, STEP_TIME_S / 2)
    assert np.allclose(call["custom_guess"], w.driver.arm_positions(), atol=1e-6)
    close_name, open_name = ("grasp", "release") if ros == 2 else ("close", "open")
    assert w.bot.gripper.calls == [(open_name, 0.0), (close_name, 0.0)]
    robot.apply(target, 0.0)
    assert len(w.bot.gripper.calls) == 2  # an unchanged command sends nothing
    w.clock.sleep(0.5)
    assert np.allclose(robot.observe().ee_pose[:3, 3], target[:3, 3], atol=1e-3)
    far = target.copy()
    far[0, 3] = 0.7  # out of reach
    r1, r2 = robot.apply(far, 0.0), robot.apply(far, 1.0)
    assert r1.ik_failed and r2.ik_failed and r2.ik_failures == 2 == robot.ik_failures
    robot.reset()
    assert robot.ik_failures == 0 and robot.ik_failures_total == 2


def test_resets_from_every_reachable_end_pose_succeed_where_the_old_ones_were_refused():
    result = sweep(n=80, seed=1)
    assert result.reachable >= 60
    assert result.new_failed == 0
    # the fake reproduces the old reset's failure: Interbotix checks its speed against 0.2 s
    assert result.old_refused >= result.reachable // 2 and result.old_failed == result.old_refused
    assert min(result.old_home_speeds) > 0 and max(result.old_home_speeds) > 3 * np.pi
    assert result.new_dip_m < 0.01  # the joint-space route never dives towards the table


def test_a_reset_sets_its_own_time_moves_in_joint_space_then_restores_the_step_time(monkeypatch, world):
    w = world(clock=VirtualClock())
    robot = connected(monkeypatch, w, reset_time_s=3.0)
    start = w.clock.now()
    robot.reset()
    moves = [(name, call) for name, call in w.bot.arm.log if name in ("set_joint_positions", "set_ee_pose_matrix")]
    (first, joint_move), (second, refine) = moves
    assert first == "set_joint_positions" and joint_move["ok"] and joint_move["moving_time"] == 3.0
    assert np.allclose(joint_move["positions"], RESET_JOINTS["wx250s"]) and joint_move["blocking"]
    assert second == "set_ee_pose_matrix" and refine["ok"] and refine["blocking"]
    assert np.allclose(refine["custom_guess"], RESET_JOINTS["wx250s"], atol=0.01)  # seeded where the arm is
    assert w.clock.now() - start == pytest.approx(6.0)
    assert w.bot.arm.moving_time == STEP_TIME_S and w.driver.profile_velocity_ms == 200


def test_hold_of_an_arm_far_behind_its_command_is_accepted(monkeypatch, world):
    w = world(clock=VirtualClock())
    robot = connected(monkeypatch, w)
    robot.reset()
    w.driver.block("shoulder")  # an obstacle: the shoulder stops, its command runs on
    arm = w.bot.arm
    arm.set_trajectory_time(1.0, 0.25)
    assert arm.set_joint_positions(np.add(arm.joint_commands, [0, 0.8, 0, 0, 0, 0]), moving_time=1.0)
    measured = w.driver.arm_positions()
    arm.set_trajectory_time(STEP_TIME_S, STEP_TIME_S / 2)
    assert not arm._check_joint_limits(measured)  # a hold at the step's time: refused (0.8 rad in 0.2 s)
    robot.hold()
    name, call = arm.log[-1]
    assert name == "set_joint_positions" and call["ok"] and np.allclose(call["positions"], measured)
    assert arm.moving_time == STEP_TIME_S  # back to the step's time after the longer hold


def test_park_goes_through_the_reset_configuration_to_the_sleep_pose(monkeypatch, world):
    w = world(clock=VirtualClock(), lag_s=0.0)
    robot = connected(monkeypatch, w)
    robot.reset()
    robot.park()
    names = [name for name, _ in w.bot.arm.log][-2:]
    assert names == ["set_joint_positions", "go_to_sleep_pose"]
    assert w.bot.arm.log[-1][1]["moving_time"] == 2.0
    assert np.allclose(w.driver.arm_positions(), SLEEP, atol=1e-3)


@pytest.mark.parametrize("ros", [2, 1])
def test_an_absent_driver_is_one_line_within_the_timeout(monkeypatch, world, ros):
    w = world(ros=ros, driver_running=False, service_wait_s=0.2)
    install(monkeypatch, w)
    robot = WidowXInterbotix(WidowXSettings(connect_timeout_s=0.6))
    started = time.monotonic()
    with pytest.raises(RuntimeError) as e:
        robot.connect()
    waited = time.monotonic() - started
    assert waited < 3.0
    # ROS 2's constructor waits for ever (cut at the timeout); ROS 1's exits after its own wait
    assert str(e.value) == driver_absent("wx250s", 0.6 if ros == 2 else round(waited, 1))
    assert "xsarm_control.launch.py robot_model:=wx250s" in str(e.value)


def test_the_import_falls_back_to_ros1(monkeypatch, world):
    install(monkeypatch, world(ros=1))
    assert widowx.import_interbotix().ros_version == 1

