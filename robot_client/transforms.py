"""Rotation and pose helpers shared by the real and simulated WidowX backends (numpy, scipy's Rotation)."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.spatial.transform import Rotation

# The end-effector frame of the WidowX points its x axis along the gripper. "Gripper down" is
# that frame pitched by +90 deg about the base y axis. Bridge reports end-effector angles relative
# to this orientation (its DEFAULT_ROTATION), which keeps roll/pitch/yaw away from the gimbal lock
# that pitch = 90 deg would otherwise sit on.
GRIPPER_DOWN = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])


def rpy_to_matrix(rpy: np.ndarray) -> np.ndarray:
    """Rotation matrix Rz(yaw) @ Ry(pitch) @ Rx(roll) (extrinsic x-y-z angles)."""
    return Rotation.from_euler("xyz", np.asarray(rpy, dtype=np.float64)).as_matrix()


def matrix_to_rpy(rot: np.ndarray) -> np.ndarray:
    """Extrinsic x-y-z angles (roll, pitch, yaw) of a rotation matrix; inverse of rpy_to_matrix.

    At gimbal lock (pitch = +-90 deg) only roll - yaw (or roll + yaw) is defined: yaw is 0 and roll
    holds it all (scipy's rule, whose warning says no more than that)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Gimbal lock detected", UserWarning)
        return Rotation.from_matrix(rot).as_euler("xyz")


def skew(w: np.ndarray) -> np.ndarray:
    """The 3x3 cross-product matrix of w."""
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def rotvec_to_matrix(w: np.ndarray) -> np.ndarray:
    """The rotation by |w| about w / |w| (Rodrigues)."""
    return Rotation.from_rotvec(np.asarray(w, dtype=np.float64)).as_matrix()


def matrix_to_rotvec(rot: np.ndarray) -> np.ndarray:
    """Axis times angle (in [0, pi]) of a rotation matrix; inverse of rotvec_to_matrix."""
    return Rotation.from_matrix(rot).as_rotvec()


def pose_to_ee_state(pose: np.ndarray) -> np.ndarray:
    """xyz and Bridge-convention roll/pitch/yaw (relative to gripper down) of a 4x4 pose."""
    return np.concatenate([pose[:3, 3], matrix_to_rpy(pose[:3, :3] @ GRIPPER_DOWN.T)])


def ee_state_to_pose(state: np.ndarray) -> np.ndarray:
    """Inverse of pose_to_ee_state: the 4x4 pose of xyz + Bridge roll/pitch/yaw."""
    pose = np.eye(4)
    pose[:3, :3] = rpy_to_matrix(state[3:6]) @ GRIPPER_DOWN
    pose[:3, 3] = state[:3]
    return pose


def rotation_towards(current: np.ndarray, goal: np.ndarray, max_angle: float) -> np.ndarray:
    """Bridge droll/dpitch/dyaw (applied on the left) turning `current` towards `goal` by at most
    max_angle (rad)."""
    w = matrix_to_rotvec(goal @ current.T)
    n = np.linalg.norm(w)
    if n > max_angle:
        w = w * (max_angle / n)
    return matrix_to_rpy(rotvec_to_matrix(w))
