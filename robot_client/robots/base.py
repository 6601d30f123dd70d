"""The `Robot` interface the control loop drives; it never knows which backend is behind it."""

from __future__ import annotations

import abc
import dataclasses
import logging
from typing import Optional

import numpy as np

logger = logging.getLogger(__name__)


class RobotNotConnectedError(RuntimeError):
    """A robot method was called before connect() or after close()."""


@dataclasses.dataclass(frozen=True)
class RobotState:
    """What the loop needs from the arm each step."""

    ee_pose: np.ndarray  # 4x4 gripper-tip pose in the base frame (m)
    gripper: float  # gripper command in force: 1 open, 0 closed


@dataclasses.dataclass(frozen=True)
class ApplyResult:
    """The outcome of sending one target pose."""

    ik_failed: bool  # the arm could not reach the target and did not move (counted, never ignored)
    ik_failures: int  # IK failures since the last reset


class Robot(abc.ABC):
    """An arm taking absolute end-effector targets at the control rate.

    Usage: `with SomeRobot(...) as robot: robot.reset(); robot.apply(T, 1.0); ...`. The loop applies
    the safety checks before `apply`; backends add none of their own policy.
    """

    name: str = "robot"

    def __init__(self) -> None:
        self._connected = False

    @property
    def is_connected(self) -> bool:
        """Whether connect() succeeded and close() has not run."""
        return self._connected

    def _require_connected(self) -> None:
        if not self._connected:
            raise RobotNotConnectedError(f"{type(self).__name__} is not connected. Run .connect() first.")

    @abc.abstractmethod
    def connect(self) -> None:
        """Open the connection to the arm (and its camera, for backends that own one)."""

    @abc.abstractmethod
    def observe(self) -> RobotState:
        """The current end-effector pose and gripper command."""

    @abc.abstractmethod
    def apply(self, target_pose: np.ndarray, gripper: float) -> ApplyResult:
        """Start moving to `target_pose` (4x4, base frame) over one period without blocking, and
        set the gripper (1 open, 0 closed)."""

    @abc.abstractmethod
    def hold(self) -> None:
        """Stop where the arm is now: no further motion until the next apply()."""

    @abc.abstractmethod
    def reset(self, seed: Optional[int] = None) -> None:
        """Move (blocking) to the reset pose, gripper down and open; the twin also resets its scene."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the arm; safe to call twice."""

    def safe_pose(self) -> None:
        """Where the arm goes after an aborted trial; by default it keeps holding."""
        self.hold()

    def fault(self) -> Optional[str]:
        """A hardware fault that must end the trial, as one line saying what to do; None if none."""
        return None

    def park(self) -> None:
        """Where the arm rests when the client shuts down; by default it keeps holding."""
        self.hold()

    @property
    def ik_failures(self) -> int:
        """IK failures since the last reset."""
        return 0

    def __enter__(self) -> Robot:
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self._connected:
                self.hold()
        except Exception:  # the arm is going away anyway; closing matters more than this hold
            logger.exception("hold on exit failed")
        finally:
            self.close()
