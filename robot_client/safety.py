"""Action bounds, workspace clipping and the sticky gripper, shared by the real and simulated robot.

Numbers of the Bridge WidowX evaluation setup. Numpy only, so that the
real-robot client uses exactly the same code as the twin.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from robot_client.transforms import rpy_to_matrix

logger = logging.getLogger(__name__)

ACTION_DIM = 7
ACTION_NAMES = ("dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper")
MAX_DELTA_XYZ = 0.05  # m per 5 Hz step, per axis
MAX_DELTA_RPY = 0.25  # rad per 5 Hz step, per axis
WORKSPACE_LOW = np.array([0.1, -0.15, -0.01])  # m, end-effector tip in the base frame
WORKSPACE_HIGH = np.array([0.45, 0.25, 0.25])
RESET_XYZ = np.array([0.3, 0.0, 0.15])  # m, gripper pointing down and open
CONTROL_HZ = 5.0
# What an action's delta is added to. "measured": the pose the arm is at (deltas relabelled to the
# reached state); "previous_target": the target of the step before, as Bridge's controller adds its
# commanded actions (the arm trails its target, so the same deltas then cover more ground).
ACTION_FRAMES = ("measured", "previous_target")
DEFAULT_ACTION_FRAME = "measured"  # checkpoints that do not say
# m per axis the previous target may lead the measured tip: a blocked arm's target stops running away
MAX_TARGET_LEAD_XYZ = 2 * MAX_DELTA_XYZ


def clip_action(action: np.ndarray) -> np.ndarray:
    """Clip a 7-d Bridge action to the per-step bounds; NaN or a wrong shape raises ValueError."""
    action = np.asarray(action, dtype=np.float64)
    if action.shape != (ACTION_DIM,):
        raise ValueError(
            f"action has shape {action.shape}; expected ({ACTION_DIM},) = {ACTION_NAMES}"
        )
    if not np.all(np.isfinite(action)):
        raise ValueError(f"action contains NaN or inf: {action.tolist()}; refusing to move the arm")
    out = action.copy()
    out[:3] = np.clip(out[:3], -MAX_DELTA_XYZ, MAX_DELTA_XYZ)
    out[3:6] = np.clip(out[3:6], -MAX_DELTA_RPY, MAX_DELTA_RPY)
    out[6] = np.clip(out[6], 0.0, 1.0)
    return out


def clip_to_workspace(xyz: np.ndarray) -> np.ndarray:
    """Clip an end-effector position (base frame, m) to the evaluation workspace box."""
    return np.clip(np.asarray(xyz, dtype=np.float64), WORKSPACE_LOW, WORKSPACE_HIGH)


def target_pose(current: np.ndarray, action: np.ndarray) -> np.ndarray:
    """The 4x4 end-effector target of a clipped action applied to the current pose (base frame).

    Translation adds in the base frame and is clipped to the workspace; the rotation delta is
    applied on the left (about base axes), as the Bridge WidowX controller does.
    """
    action = clip_action(action)
    target = np.eye(4)
    target[:3, :3] = rpy_to_matrix(action[3:6]) @ current[:3, :3]
    target[:3, 3] = clip_to_workspace(current[:3, 3] + action[:3])
    return target


def lead_limited(previous_target: np.ndarray, measured: np.ndarray) -> tuple:
    """(origin, pulled): the previous target with its lead over the measured tip clipped to
    MAX_TARGET_LEAD_XYZ per axis, and whether that moved it. Orientation is kept as targeted."""
    origin = np.array(previous_target, dtype=np.float64)
    lead = origin[:3, 3] - measured[:3, 3]
    limited = np.clip(lead, -MAX_TARGET_LEAD_XYZ, MAX_TARGET_LEAD_XYZ)
    origin[:3, 3] = measured[:3, 3] + limited
    return origin, bool(np.any(limited != lead))


def policy_action_frame(entry: dict) -> str:
    """The action frame a policy's /v1/metadata entry declares (its training data's convention);
    "measured" when it declares none. ValueError for a value this client does not know."""
    frame = entry.get("action_frame") or DEFAULT_ACTION_FRAME
    if frame not in ACTION_FRAMES:
        raise ValueError(f"policy '{entry.get('name')}' declares action_frame {frame!r}; this client applies "
                         f"{' or '.join(ACTION_FRAMES)}: update mqe-deploy on the robot's computer")
    return frame


@dataclasses.dataclass
class StickyGripper:
    """Binarises the gripper command at 0.5 and switches only after `consistent_steps` agreeing steps.

    Policies output a continuous gripper value that hovers near 0.5 during a grasp; switching on
    every crossing makes the real gripper chatter and drop objects.
    """

    consistent_steps: int = 2  # steps the new command must persist before the gripper switches
    state: float = 1.0  # current command: 1 open, 0 closed
    _pending: int = 0

    def __post_init__(self) -> None:
        if self.consistent_steps < 1:
            raise ValueError(f"consistent_steps must be >= 1, got {self.consistent_steps}")

    def reset(self, state: float = 1.0) -> None:
        """Start over from `state` (1 open, 0 closed)."""
        self.state = float(state)
        self._pending = 0

    def __call__(self, command: float) -> float:
        """Feed one raw gripper command; return the binary command to send (1 open, 0 closed)."""
        wanted = 1.0 if command >= 0.5 else 0.0
        if wanted == self.state:
            self._pending = 0
            return self.state
        self._pending += 1
        if self._pending >= self.consistent_steps:
            self.state, self._pending = wanted, 0
            logger.debug("gripper switched to %s", "open" if wanted else "closed")
        return self.state
