"""Rotation and pose helpers shared by the real and simulated WidowX backends (numpy only)."""

from __future__ import annotations

import numpy as np

# The end-effector frame of the WidowX points its x axis along the gripper. "Gripper down" is
# that frame pitched by +90 deg about the base y axis. Bridge reports end-effector angles relative
# to this orientation (its DEFAULT_ROTATION), which keeps roll/pitch/yaw away from the gimbal lock
# that pitch = 90 deg would otherwise sit on.
GRIPPER_DOWN = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])


def rpy_to_matrix(rpy: np.ndarray) -> np.ndarray:
    """Rotation matrix Rz(yaw) @ Ry(pitch) @ Rx(roll) (extrinsic x-y-z angles)."""
    r, p, y = np.asarray(rpy, dtype=np.float64)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def matrix_to_rpy(rot: np.ndarray) -> np.ndarray:
    """Extrinsic x-y-z angles (roll, pitch, yaw) of a rotation matrix; inverse of rpy_to_matrix."""
    pitch = np.arcsin(np.clip(-rot[2, 0], -1.0, 1.0))
    if abs(rot[2, 0]) < 1.0 - 1e-9:
        roll = np.arctan2(rot[2, 1], rot[2, 2])
        yaw = np.arctan2(rot[1, 0], rot[0, 0])
    else:  # gimbal lock: only roll - yaw (or roll + yaw) is defined; put it all in roll
        roll = np.arctan2(-rot[1, 2], rot[1, 1])
        yaw = 0.0
    return np.array([roll, pitch, yaw])


def skew(w: np.ndarray) -> np.ndarray:
    """The 3x3 cross-product matrix of w."""
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def rotvec_to_matrix(w: np.ndarray) -> np.ndarray:
    """Rodrigues: the rotation by |w| about w / |w|."""
    theta = float(np.linalg.norm(w))
    if theta < 1e-12:
        return np.eye(3) + skew(w)
    k = skew(np.asarray(w) / theta)
    return np.eye(3) + np.sin(theta) * k + (1.0 - np.cos(theta)) * (k @ k)


def matrix_to_rotvec(rot: np.ndarray) -> np.ndarray:
    """Axis times angle (in [0, pi]) of a rotation matrix; inverse of rotvec_to_matrix."""
    cos = np.clip((np.trace(rot) - 1.0) / 2.0, -1.0, 1.0)
    theta = float(np.arccos(cos))
    vee = np.array([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0], rot[1, 0] - rot[0, 1]])
    if theta < 1e-6:
        return 0.5 * vee
    if np.pi - theta < 1e-4:
        # near pi the antisymmetric part vanishes; (R + R^T)/2 - cos I = (1 - cos) a a^T holds the axis
        sym = (rot + rot.T) / 2.0 - cos * np.eye(3)
        i = int(np.argmax(np.diag(sym)))
        axis = sym[:, i] / np.linalg.norm(sym[:, i])
        if axis @ vee < 0:
            axis = -axis
        return theta * axis
    return theta / (2.0 * np.sin(theta)) * vee


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
