"""The MuJoCo twin as a `Robot`, with its rendered third-person view as the `Camera`.

MuJoCo state and its GL context belong to the loop's thread, so the twin renders its camera frame
in observe() (and reset()), on the loop's thread, and the camera hands out that cached frame; the
video thread only ever reads the cache. The loop observes the robot before reading the camera.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from robot_client.camera import Camera, CameraError
from robot_client.robots.base import ApplyResult, Robot, RobotState
from robot_client.transforms import matrix_to_rpy

logger = logging.getLogger(__name__)


class SimCamera(Camera):
    """The twin's rendered frame (640 x 480 RGB, like the real camera), refreshed by the robot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._frame: np.ndarray | None = None
        self._stamp = 0.0

    def connect(self) -> None:
        """Nothing to open: frames arrive from the twin."""

    def publish(self, frame: np.ndarray) -> None:
        """Store a newly rendered frame (called by WidowXSim in the loop's thread)."""
        with self._lock:
            self._frame, self._stamp = frame, time.monotonic()

    def frame(self) -> tuple[np.ndarray, float]:
        """The newest rendered frame and its age in seconds."""
        with self._lock:
            if self._frame is None:
                raise CameraError("the twin has rendered no frame yet. Run robot.connect() and .reset() first.")
            return self._frame, time.monotonic() - self._stamp

    def close(self) -> None:
        """Nothing to release."""


class WidowXSim(Robot):
    """`WidowXSimEnv` behind the Robot interface: targets become 7-d deltas for its step()."""

    name = "sim"

    def __init__(self, task: str = "single_pnp", seed: int = 0, frame_size: tuple[int, int] = (640, 480)):
        super().__init__()
        self.task, self.seed, self.frame_size = task, seed, frame_size
        self.camera = SimCamera()
        self.env = None
        self.last_info: dict = {}

    def connect(self) -> None:
        """Build the twin (MuJoCo model and renderer)."""
        from robot_client.sim import env as sim_env

        # sticky_steps=1: the client's own sticky gripper already filtered the command; a second
        # filter here would delay every switch by one more step
        config = sim_env.SimConfig(sticky_steps=1, render_observations=False, frame_size=self.frame_size,
                                   max_steps=10**9)
        self.env = sim_env.WidowXSimEnv(task=self.task, seed=self.seed, config=config)
        self._connected = True

    def _render(self) -> None:
        self.camera.publish(self.env.render())

    def observe(self) -> RobotState:
        """Tip pose and gripper command of the twin; renders the camera frame of this moment."""
        self._require_connected()
        self._render()
        return RobotState(self.env.ee_pose(), self.env.gripper_command)

    def apply(self, target_pose: np.ndarray, gripper: float) -> ApplyResult:
        """Step the twin by the delta that reaches `target_pose` (already checked by the loop)."""
        self._require_connected()
        current = self.env.ee_pose()
        delta = np.empty(7)
        delta[:3] = target_pose[:3, 3] - current[:3, 3]
        delta[3:6] = matrix_to_rpy(target_pose[:3, :3] @ current[:3, :3].T)
        delta[6] = gripper
        _, _, _, _, info = self.env.step(delta)
        self.last_info = info
        return ApplyResult(bool(info["ik_failed"]), int(info["ik_failures"]))

    def hold(self) -> None:
        """Let one period of physics pass with the joints held where they are."""
        self._require_connected()
        # a zero delta re-solves IK for the current pose: the joints stay, time moves on
        _, _, _, _, info = self.env.step(np.array([0, 0, 0, 0, 0, 0, self.env.gripper_command]))
        self.last_info = info

    def reset(self, seed: int | None = None) -> None:
        """A new seeded scene with the arm at the reset pose."""
        self._require_connected()
        self.env.reset(seed=seed)
        self._render()

    def goal_image(self, size: int) -> np.ndarray:
        """The current scene's goal (objects at their targets), size x size RGB, for rehearsals."""
        self._require_connected()
        return self.env.goal_image(size)

    def score(self) -> int:
        """Points the task's automatic scorer gives the scene now."""
        self._require_connected()
        return self.env.score()

    @property
    def max_points(self) -> int:
        """The task's maximum points."""
        return self.env.max_points

    @property
    def ik_failures(self) -> int:
        """IK failures since the last reset."""
        return self.env.ik_failures if self.env is not None else 0

    def close(self) -> None:
        """Free the renderer."""
        if self.env is not None:
            self.env.close()
            self.env = None
        self._connected = False
