"""The WidowX backend against fake `interbotix` modules injected into sys.modules (ROS 2 and ROS 1)."""

from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest

from robot_client import safety
from robot_client.loop import ControlLoop, LoopSettings
from robot_client.records import TrialRecord, read_steps
from robot_client.robots import widowx
from robot_client.robots.widowx import MISSING_INTERBOTIX, WidowXInterbotix, reset_pose_matrix
from robot_client.transforms import GRIPPER_DOWN

UNREACHABLE_X = 0.40  # the fake arm's IK fails beyond this x, like a real target out of reach


class FakeGripper:
    def __init__(self, calls: list, ros: int):
        self.calls, self.ros = calls, ros

    def __getattr__(self, name):
        valid = {"grasp", "release"} if self.ros == 2 else {"close", "open"}
        if name not in valid:
            raise AttributeError(f"ROS {self.ros} gripper has no {name}()")
        return lambda delay=1.0: self.calls.append((name, delay))


class FakeArm:
    def __init__(self, log: list):
        self.log = log
        self.pose = reset_pose_matrix()
        self.group_info = types.SimpleNamespace(joint_names=["waist", "shoulder", "elbow", "forearm_roll",
                                                             "wrist_angle", "wrist_rotate"])

    def set_ee_pose_matrix(self, T_sd, custom_guess=None, execute=True, moving_time=None, accel_time=None,
                           blocking=True):
        self.log.append(("set_ee_pose_matrix", np.array(T_sd), moving_time, accel_time, blocking))
        if T_sd[0, 3] > UNREACHABLE_X:
            return None, False
        self.pose = np.array(T_sd)
        return [0.0] * 6, True

    def get_ee_pose(self):
        return self.pose.copy()

    def get_joint_commands(self):
        return [0.1] * 6

    def set_joint_positions(self, joints, moving_time=None, accel_time=None, blocking=True):
        self.log.append(("set_joint_positions", list(joints), blocking))

    def go_to_home_pose(self):
        self.log.append(("go_to_home_pose",))


def install_fake_interbotix(monkeypatch, ros: int) -> dict:
    """Put a fake Interbotix API for ROS `ros` into sys.modules; returns the call log."""
    state = {"bots": [], "events": []}

    class InterbotixManipulatorXS:
        def __init__(self, robot_model, group_name="arm", gripper_name="gripper"):
            state["bots"].append(self)
            self.args = (robot_model, group_name, gripper_name)
            self.log, self.gripper_calls = [], []
            self.arm = FakeArm(self.log)
            self.gripper = FakeGripper(self.gripper_calls, ros)
            self.core = types.SimpleNamespace(joint_states=types.SimpleNamespace(
                name=["waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate", "gripper"],
                position=[0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.02]))

    def module(name: str, **attrs) -> types.ModuleType:
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, m)
        return m

    module("interbotix_xs_modules")
    if ros == 2:
        module("interbotix_xs_modules.xs_robot")
        module("interbotix_xs_modules.xs_robot.arm", InterbotixManipulatorXS=InterbotixManipulatorXS)
        module("interbotix_common_modules")
        module("interbotix_common_modules.common_robot")
        module("interbotix_common_modules.common_robot.robot",
               robot_startup=lambda: state["events"].append("startup"),
               robot_shutdown=lambda: state["events"].append("shutdown"))
    else:
        module("interbotix_xs_modules.xs_robot", )  # present but empty: the ROS 2 import must fail
        module("interbotix_xs_modules.arm", InterbotixManipulatorXS=InterbotixManipulatorXS)
    return state


def test_missing_interbotix_is_one_clear_line(monkeypatch):
    for name in [n for n in sys.modules if n.startswith("interbotix")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "interbotix_xs_modules", None)  # import fails, as when absent
    robot = WidowXInterbotix()
    with pytest.raises(RuntimeError) as e:
        robot.connect()
    assert str(e.value) == MISSING_INTERBOTIX


def test_methods_before_connect_say_what_to_do():
    with pytest.raises(RuntimeError, match=r"WidowXInterbotix is not connected. Run .connect\(\) first."):
        WidowXInterbotix().observe()


@pytest.mark.parametrize("ros", [2, 1])
def test_pose_matrices_gripper_calls_and_ik_failures(monkeypatch, ros):
    state = install_fake_interbotix(monkeypatch, ros)
    with WidowXInterbotix("wx250s", moving_time_s=0.2) as robot:
        bot = state["bots"][0]
        assert bot.args == ("wx250s", "arm", "gripper")
        assert state["events"] == (["startup"] if ros == 2 else [])
        robot.reset()
        call = bot.log[-1]
        assert call[0] == "set_ee_pose_matrix" and np.allclose(call[1], reset_pose_matrix()) and call[4] is True
        open_name, close_name = ("release", "grasp") if ros == 2 else ("open", "close")
        assert bot.gripper_calls == [(open_name, 0.0)]

        target = np.eye(4)
        target[:3, :3] = GRIPPER_DOWN
        target[:3, 3] = [0.32, 0.01, 0.14]
        result = robot.apply(target, 0.0)
        name, sent, moving, accel, blocking = bot.log[-1]
        assert name == "set_ee_pose_matrix" and np.array_equal(sent, target)
        assert (moving, accel, blocking) == (0.2, 0.1, False)  # one period, non-blocking
        assert not result.ik_failed
        assert bot.gripper_calls[-1] == (close_name, 0.0)
        robot.apply(target, 0.0)
        assert len(bot.gripper_calls) == 2  # unchanged command: no new gripper call
        assert np.allclose(robot.observe().ee_pose, target) and robot.observe().gripper == 0.0

        far = target.copy()
        far[0, 3] = 0.44
        r1, r2 = robot.apply(far, 0.0), robot.apply(far, 1.0)
        assert r1.ik_failed and r2.ik_failed and r2.ik_failures == 2 and robot.ik_failures == 2
        assert bot.gripper_calls[-1] == (open_name, 0.0)

        robot.hold()  # measured joints from the joint states, in the arm group's order
        assert bot.log[-1] == ("set_joint_positions", [0.0, 0.1, 0.2, 0.3, 0.4, 0.5], False)
        robot.reset()
        assert robot.ik_failures == 0 and robot.ik_failures_total == 2
    assert state["events"][-1:] == (["shutdown"] if ros == 2 else [])


class StillCamera:
    """A camera that always shows the same 640x480 frame."""

    def connect(self) -> None: ...

    def frame(self):
        return np.full((480, 640, 3), 90, np.uint8), 0.01

    def close(self) -> None: ...


def test_loop_sends_only_bounded_pose_matrices_to_the_arm(monkeypatch, tmp_path, mock_server):
    """Huge actions from the server: every matrix the arm gets is one clipped step inside the box."""
    from mqe_client.client import PolicyClient, check_metadata

    state = install_fake_interbotix(monkeypatch, 2)
    server = mock_server("--mode", "huge")
    settings = LoopSettings(hz=10.0, max_steps=10, request_deadline_s=0.06)
    with PolicyClient(server.url, timeout_s=0.06) as client, WidowXInterbotix() as robot:
        info = check_metadata(client.metadata(), None, safety.ACTION_NAMES)
        robot.reset()
        client.set_goal(np.zeros((128, 128, 3), np.uint8), info.name)
        record = TrialRecord(tmp_path, 1, {})
        outcome = ControlLoop(robot, StillCamera(), client, settings, info.image_size, info.fingerprint,
                              threading.Event()).run(record, "ep")
        record.finish(status=outcome.status)
    bot = state["bots"][0]
    sent = [c[1] for c in bot.log if c[0] == "set_ee_pose_matrix" and c[4] is False]
    assert len(sent) == outcome.counters.actions_applied >= 6
    previous = reset_pose_matrix()
    for T in sent:
        assert np.all(np.abs(T[:3, 3] - previous[:3, 3]) <= safety.MAX_DELTA_XYZ + 1e-9)
        assert np.all(T[:3, 3] >= safety.WORKSPACE_LOW - 1e-9) and np.all(T[:3, 3] <= safety.WORKSPACE_HIGH + 1e-9)
        assert np.allclose(T[:3, :3] @ T[:3, :3].T, np.eye(3), atol=1e-9)  # a proper rotation
        if T[0, 3] <= UNREACHABLE_X:  # the fake arm moved there
            previous = T
    steps = read_steps(tmp_path / "steps.jsonl")
    assert sum(s["flags"].get("ik_failed", False) for s in steps) == outcome.counters.ik_failures
    assert widowx.import_interbotix().ros_version == 2
