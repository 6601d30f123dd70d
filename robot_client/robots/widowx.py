"""The real WidowX 250 6DOF through the Interbotix Python API (ROS 2, or ROS 1 as a fallback).

The Interbotix modules are ROS packages, not on PyPI; they are imported in connect() so that the
rest of the client (and the twin) works without ROS. DESIGN.md section 5 lists the API used here.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np

from robot_client import safety
from robot_client.robots.base import ApplyResult, Robot, RobotState
from robot_client.transforms import GRIPPER_DOWN

logger = logging.getLogger(__name__)

MISSING_INTERBOTIX = (
    "interbotix_xs_modules not found: install the Interbotix ROS packages (see README, 'Real robot'), "
    "or use --robot sim"
)


@dataclasses.dataclass(frozen=True)
class InterbotixAPI:
    """The pieces of the Interbotix API that differ between its ROS 2 and ROS 1 releases."""

    ros_version: int  # 2 or 1
    manipulator_cls: Any  # InterbotixManipulatorXS
    startup: Any = None  # ROS 2: robot_startup(); ROS 1: None (rospy starts in the constructor)
    shutdown: Any = None  # ROS 2: robot_shutdown()


def import_interbotix() -> InterbotixAPI:
    """Import the ROS 2 Interbotix modules, else the ROS 1 ones, else one clear RuntimeError."""
    try:
        from interbotix_xs_modules.xs_robot.arm import InterbotixManipulatorXS

        try:
            from interbotix_common_modules.common_robot.robot import robot_shutdown, robot_startup
        except ImportError:  # older ROS 2 releases start the node in the constructor
            robot_startup = robot_shutdown = None
        return InterbotixAPI(2, InterbotixManipulatorXS, robot_startup, robot_shutdown)
    except ImportError:
        pass
    try:
        from interbotix_xs_modules.arm import InterbotixManipulatorXS

        return InterbotixAPI(1, InterbotixManipulatorXS)
    except ImportError:
        raise RuntimeError(MISSING_INTERBOTIX) from None


def reset_pose_matrix() -> np.ndarray:
    """The reset pose: tip at RESET_XYZ, gripper pointing down (DESIGN.md section 5)."""
    pose = np.eye(4)
    pose[:3, :3] = GRIPPER_DOWN
    pose[:3, 3] = safety.RESET_XYZ
    return pose


class WidowXInterbotix(Robot):
    """WidowX 250 6DOF: one non-blocking `set_ee_pose_matrix` per step; IK failures counted."""

    name = "widowx"

    def __init__(self, robot_model: str = "wx250s", moving_time_s: float = 0.2,
                 reset_moving_time_s: float = 2.0):
        super().__init__()
        self.robot_model = robot_model
        self.moving_time_s = moving_time_s
        # half the move accelerating, half decelerating: the smoothest profile that still ends in time
        self.accel_time_s = moving_time_s / 2
        self.reset_moving_time_s = reset_moving_time_s
        self.api: InterbotixAPI | None = None
        self.bot = None
        self._gripper = 1.0
        self._ik_failures = 0
        self.ik_failures_total = 0

    def connect(self) -> None:
        """Start the Interbotix node for the arm and its gripper."""
        self.api = import_interbotix()
        self.bot = self.api.manipulator_cls(robot_model=self.robot_model, group_name="arm",
                                            gripper_name="gripper")
        if self.api.startup is not None:
            self.api.startup()
        self._connected = True
        logger.info("WidowX %s connected through the ROS %d Interbotix API", self.robot_model,
                    self.api.ros_version)

    def observe(self) -> RobotState:
        """The tip pose Interbotix reports and the gripper command in force."""
        self._require_connected()
        return RobotState(np.asarray(self.bot.arm.get_ee_pose(), dtype=np.float64), self._gripper)

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

    def apply(self, target_pose: np.ndarray, gripper: float) -> ApplyResult:
        """Send the target without blocking; an IK failure leaves the arm where it is, counted."""
        self._require_connected()
        _, success = self.bot.arm.set_ee_pose_matrix(
            np.asarray(target_pose, dtype=np.float64), custom_guess=None, execute=True,
            moving_time=self.moving_time_s, accel_time=self.accel_time_s, blocking=False,
        )
        failed = not success
        if failed:
            self._ik_failures += 1
            self.ik_failures_total += 1
            logger.warning("IK failed for target xyz %s (%d this trial)",
                           np.round(target_pose[:3, 3], 4).tolist(), self._ik_failures)
        self._set_gripper(1.0 if gripper >= 0.5 else 0.0)
        return ApplyResult(failed, self._ik_failures)

    def _measured_joints(self) -> list[float] | None:
        """Arm joint positions from the joint states topic (ROS 2: core, ROS 1: dxl), if readable."""
        core = getattr(self.bot, "core", None) or getattr(self.bot, "dxl", None)
        states = getattr(core, "joint_states", None)
        names = getattr(getattr(self.bot.arm, "group_info", None), "joint_names", None)
        if states is None or names is None:
            return None
        index = {n: i for i, n in enumerate(states.name)}
        try:
            return [float(states.position[index[n]]) for n in names]
        except (KeyError, IndexError):
            return None

    def hold(self) -> None:
        """Command the joints to where they are measured (else where they were last sent)."""
        self._require_connected()
        joints = self._measured_joints()
        if joints is None:
            joints = list(self.bot.arm.get_joint_commands())
        self.bot.arm.set_joint_positions(joints, moving_time=self.moving_time_s,
                                         accel_time=self.accel_time_s, blocking=False)

    def reset(self, seed: int | None = None) -> None:
        """Move slowly (blocking) to the reset pose and open the gripper."""
        self._require_connected()
        self._set_gripper_forced(1.0)
        _, success = self.bot.arm.set_ee_pose_matrix(
            reset_pose_matrix(), custom_guess=None, execute=True,
            moving_time=self.reset_moving_time_s, accel_time=self.reset_moving_time_s / 4, blocking=True,
        )
        if not success:
            # from a far-off pose IK may not converge; home is a known configuration near the reset
            logger.warning("IK failed for the reset pose; going home first and retrying")
            self.bot.arm.go_to_home_pose()
            _, success = self.bot.arm.set_ee_pose_matrix(
                reset_pose_matrix(), custom_guess=None, execute=True,
                moving_time=self.reset_moving_time_s, accel_time=self.reset_moving_time_s / 4,
                blocking=True,
            )
            if not success:
                raise RuntimeError("the WidowX cannot reach the reset pose: check the arm for "
                                   "obstacles and its joint limits, then retry")
        self._ik_failures = 0

    def safe_pose(self) -> None:
        """After an abort: move slowly (blocking) to the reset pose, the gripper left as it is
        (opening it could drop a held object)."""
        self._require_connected()
        _, success = self.bot.arm.set_ee_pose_matrix(
            reset_pose_matrix(), custom_guess=None, execute=True,
            moving_time=self.reset_moving_time_s, accel_time=self.reset_moving_time_s / 4, blocking=True,
        )
        if not success:
            logger.warning("IK failed for the safe pose; the arm holds where it is")

    def _set_gripper_forced(self, command: float) -> None:
        self._gripper = 1.0 - command  # make _set_gripper send it whatever it thinks is in force
        self._set_gripper(command)

    @property
    def ik_failures(self) -> int:
        """IK failures since the last reset."""
        return self._ik_failures

    def close(self) -> None:
        """Shut the Interbotix node down (ROS 2); the arm keeps its last pose under torque."""
        if self._connected and self.api is not None and self.api.shutdown is not None:
            self.api.shutdown()
        self._connected = False
