"""The real WidowX 250 6DOF through the Interbotix Python API (ROS 2 humble, or ROS 1 noetic).

Interbotix checks each command's joint speeds against the trajectory time *in force before the
call* (`moving_time`, which a call's own argument changes only afterwards). Left at a step's 0.2 s,
that check refuses most slow moves, so resets, safe poses and the sleep pose first set their own
trajectory time (seconds), move in joint space to the reset configuration, refine the pose by IK
seeded with the joints the arm is at, and then put the step's time back. Each step's IK is seeded
with the measured joints too, so it stays on the arm's branch.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, List, Optional

import numpy as np

from robot_client import safety
from robot_client.robots.base import ApplyResult, Robot, RobotState
from robot_client.robots.interbotix import (
    MISSING_INTERBOTIX,
    InterbotixAPI,
    import_interbotix,
    make_manipulator,
    start_ros,
)
from robot_client.robots.widowx_faults import FaultLimits, FaultWatch
from robot_client.transforms import GRIPPER_DOWN

logger = logging.getLogger(__name__)

__all__ = ["MISSING_INTERBOTIX", "RESET_JOINTS", "WidowXInterbotix", "WidowXSettings", "import_interbotix",
           "reset_pose_matrix"]

# Joints (rad, waist..wrist_rotate) of the reset pose, by robot model: modern_robotics IKinSpace of
# reset_pose_matrix() on Interbotix's wx250s description (tests check FK of these against the pose).
RESET_JOINTS = {"wx250s": (0.0, 0.021951, 0.183174, 0.0, 1.365672, 0.0)}
HOLD_SPEED_MARGIN = 1.1  # a hold's trajectory time leaves this factor under the joints' speed limits


def reset_pose_matrix() -> np.ndarray:
    """The reset pose: tip at RESET_XYZ, gripper pointing down."""
    pose = np.eye(4)
    pose[:3, :3] = GRIPPER_DOWN
    pose[:3, 3] = safety.RESET_XYZ
    return pose


@dataclasses.dataclass(frozen=True)
class WidowXSettings:
    """How the client drives the WidowX."""

    robot_model: str = "wx250s"  # interbotix robot_model (one with known reset joints)
    moving_time_s: float = 0.2  # s, trajectory time of each step's target (one period at 5 Hz)
    reset_time_s: float = 2.0  # s, trajectory time of each leg of a reset, safe-pose or sleep move
    connect_timeout_s: float = 10.0  # s, longest wait for the driver (xs_sdk) when connecting
    faults: FaultLimits = FaultLimits()  # effort limits, driver timeout, motor status polling

    def __post_init__(self) -> None:
        if self.robot_model not in RESET_JOINTS:
            raise ValueError(f"robot model {self.robot_model!r} has no known reset joints; the client "
                             f"drives {', '.join(sorted(RESET_JOINTS))}")
        if not self.moving_time_s > 0:
            raise ValueError(f"moving time {self.moving_time_s} s must be > 0")
        if not self.reset_time_s >= 1.0:
            raise ValueError(f"reset time {self.reset_time_s} s must be >= 1 s: resets cross the workspace")
        if not self.connect_timeout_s > 0:
            raise ValueError(f"connect timeout {self.connect_timeout_s} s must be > 0")

    @property
    def accel_time_s(self) -> float:
        """Half of each step accelerating, half decelerating: the smoothest profile that ends in time."""
        return self.moving_time_s / 2

    @property
    def reset_accel_s(self) -> float:
        """A quarter of a reset leg's time at each end to and from full speed."""
        return self.reset_time_s / 4


class WidowXInterbotix(Robot):
    """WidowX 250 6DOF: one non-blocking `set_ee_pose_matrix` per step; IK failures counted."""

    name = "widowx"

    def __init__(self, settings: WidowXSettings = WidowXSettings()):
        super().__init__()
        self.s = settings
        self.api: Optional[InterbotixAPI] = None
        self.bot: Any = None
        self.core: Any = None
        self.watch: Optional[FaultWatch] = None
        self._gripper = 1.0
        self._ik_failures = 0
        self.ik_failures_total = 0

    def connect(self) -> None:
        """Start ROS (without its signal handlers) and the Interbotix node, then watch for faults."""
        self.api = import_interbotix()
        start_ros(self.api.ros_version)
        self.bot = make_manipulator(self.api, self.s.robot_model, self.s.moving_time_s, self.s.accel_time_s,
                                    self.s.connect_timeout_s)
        if self.api.startup is not None:
            self.api.startup()
        self.core = getattr(self.bot, "core", None) or self.bot.dxl  # ROS 2: core, ROS 1: dxl
        self.watch = FaultWatch(self.core, self.bot.arm.group_info.joint_names, self.s.faults, self.s.robot_model)
        self.watch.start()
        self._connected = True
        self._step_timing()
        logger.info("WidowX %s connected through the ROS %d Interbotix API", self.s.robot_model,
                    self.api.ros_version)

    def observe(self) -> RobotState:
        """The tip pose Interbotix reports (FK of the measured joints) and the gripper command."""
        self._require_connected()
        return RobotState(np.asarray(self.bot.arm.get_ee_pose(), dtype=np.float64), self._gripper)

    def fault(self) -> Optional[str]:
        """A stopped driver, a joint over its effort limit or a motor error, as one line."""
        self._require_connected()
        return self.watch.check()

    def _set_gripper(self, command: float) -> None:
        # only on a change: each call starts a gripper motion, and resending it makes it stutter
        if command == self._gripper:
            return
        grip = self.bot.gripper
        if command >= 0.5:
            (grip.release if self.api.ros_version == 2 else grip.open)(delay=0.0)
        else:
            (grip.grasp if self.api.ros_version == 2 else grip.close)(delay=0.0)
        self._gripper = command

    def _set_gripper_forced(self, command: float) -> None:
        self._gripper = 1.0 - command  # make _set_gripper send it whatever it thinks is in force
        self._set_gripper(command)

    def apply(self, target_pose: np.ndarray, gripper: float) -> ApplyResult:
        """Send the target without blocking; an IK failure leaves the arm where it is, counted."""
        self._require_connected()
        _, success = self.bot.arm.set_ee_pose_matrix(
            np.asarray(target_pose, dtype=np.float64), custom_guess=self._measured_joints(), execute=True,
            moving_time=self.s.moving_time_s, accel_time=self.s.accel_time_s, blocking=False,
        )
        failed = not success
        if failed:
            self._ik_failures += 1
            self.ik_failures_total += 1
            logger.warning("IK failed for target xyz %s (%d this trial)",
                           np.round(target_pose[:3, 3], 4).tolist(), self._ik_failures)
        self._set_gripper(1.0 if gripper >= 0.5 else 0.0)
        return ApplyResult(failed, self._ik_failures)

    def _measured_joints(self) -> Optional[List[float]]:
        """Arm joint positions from the joint states topic, in the arm group's order, if readable."""
        states = getattr(self.core, "joint_states", None)
        if states is None:
            return None
        index = getattr(self.core, "js_index_map", None) or {n: i for i, n in enumerate(states.name)}
        try:
            return [float(states.position[index[n]]) for n in self.bot.arm.group_info.joint_names]
        except (KeyError, IndexError):
            return None

    def _step_timing(self) -> None:
        self.bot.arm.set_trajectory_time(moving_time=self.s.moving_time_s, accel_time=self.s.accel_time_s)

    def _command_joints(self, joints, seconds: float, blocking: bool) -> bool:
        """Joint targets over `seconds`, the trajectory time set first so that Interbotix's speed
        check divides by it; False if Interbotix refused them (limits)."""
        arm = self.bot.arm
        accel = seconds / 4 if seconds > self.s.moving_time_s else seconds / 2
        arm.set_trajectory_time(moving_time=seconds, accel_time=accel)
        return bool(arm.set_joint_positions(list(joints), moving_time=seconds, accel_time=accel, blocking=blocking))

    def hold(self) -> None:
        """Command the joints to where they are measured (else where they were last sent), over a
        step's time or longer if the arm trails its last command by more than a step can cover."""
        self._require_connected()
        if self.watch is not None and self.watch.driver_lost:
            return  # nobody to hold the arm but its motors, which keep their last goal
        arm = self.bot.arm
        joints = self._measured_joints() or list(arm.get_joint_commands())
        gap = np.abs(np.subtract(joints, arm.get_joint_commands())) / np.asarray(arm.group_info.joint_velocity_limits)
        seconds = max(self.s.moving_time_s, float(gap.max()) * HOLD_SPEED_MARGIN)
        try:
            if not self._command_joints(joints, seconds, blocking=False):
                logger.error("Interbotix refused the hold at %s (joint limits); the arm keeps its last command",
                             np.round(joints, 3).tolist())
        finally:
            if seconds != self.s.moving_time_s:
                self._step_timing()

    def _through_reset_joints(self, what: str) -> None:
        """Joint move to the reset configuration, then IK to the exact reset pose from there."""
        arm = self.bot.arm
        try:
            if not self._command_joints(RESET_JOINTS[self.s.robot_model], self.s.reset_time_s, blocking=True):
                raise RuntimeError(f"Interbotix refused the {what}'s joint move to the reset configuration "
                                   "(a joint outside its limits?): check the arm, move it by hand with "
                                   "torque off if needed, then retry")
            _, success = arm.set_ee_pose_matrix(
                reset_pose_matrix(), custom_guess=self._measured_joints() or arm.get_joint_commands(),
                execute=True, moving_time=self.s.reset_time_s, accel_time=self.s.reset_accel_s, blocking=True)
            if not success:
                logger.warning("the %s stays at the reset configuration: IK refused the last refinement", what)
        finally:
            self._step_timing()

    def _driver_lost(self, what: str) -> bool:
        # its service calls would wait for ever (ROS 2) or fail (ROS 1); its motors hold their last goal
        if self.watch is not None and self.watch.driver_lost:
            logger.error("no %s: the arm's driver is gone, nothing can move the arm (its motors hold "
                         "their last goal under torque)", what)
            return True
        return False

    def reset(self, seed: Optional[int] = None) -> None:
        """Open the gripper and move (blocking, reset_time_s per leg) to the reset pose."""
        self._require_connected()
        self._set_gripper_forced(1.0)
        self._through_reset_joints("reset")
        self._ik_failures = 0

    def safe_pose(self) -> None:
        """After an abort: the reset pose's route, the gripper left as it is (opening it could drop
        a held object)."""
        self._require_connected()
        if not self._driver_lost("safe pose"):
            self._through_reset_joints("safe pose")

    def park(self) -> None:
        """At shutdown: through the reset configuration to Interbotix's sleep pose, where the arm
        rests on its own."""
        self._require_connected()
        if self._driver_lost("sleep pose"):
            return
        arm = self.bot.arm
        try:
            if not self._command_joints(RESET_JOINTS[self.s.robot_model], self.s.reset_time_s, blocking=True):
                logger.error("Interbotix refused the move towards the sleep pose; the arm stays where it is")
                return
            arm.set_trajectory_time(moving_time=self.s.reset_time_s, accel_time=self.s.reset_accel_s)
            arm.go_to_sleep_pose(moving_time=self.s.reset_time_s, accel_time=self.s.reset_accel_s, blocking=True)
        finally:
            self._step_timing()

    @property
    def ik_failures(self) -> int:
        """IK failures since the last reset."""
        return self._ik_failures

    def close(self) -> None:
        """Stop the fault watch and shut ROS down; the arm keeps its last pose under torque."""
        if self.watch is not None:
            self.watch.close()
            self.watch = None
        if self._connected and self.api is not None:
            if self.api.shutdown is not None:
                self.api.shutdown()
            elif self.api.ros_version == 1:
                import rospy

                rospy.signal_shutdown("mqe-robot done")
        self._connected = False
