"""WidowX 250 6DOF (interbotix wx250s) kinematic constants and product-of-exponentials FK (numpy).

The facts are the public ones of interbotix `mr_descriptions`. The MJCF model
(`model.py`) is built from the same joint offsets, and the tests check it against `fk` below.
"""

from __future__ import annotations

import numpy as np

from robot_client.transforms import rotvec_to_matrix, skew

JOINT_NAMES = ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate")

# Space-frame screw axes (omega; v), one row per joint, from interbotix mr_descriptions (wx250s).
SCREW_AXES = np.array(
    [
        [0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        [0.0, 1.0, 0.0, -0.11065, 0.0, 0.0],
        [0.0, 1.0, 0.0, -0.36065, 0.0, 0.04975],
        [1.0, 0.0, 0.0, 0.0, 0.36065, 0.0],
        [0.0, 1.0, 0.0, -0.36065, 0.0, 0.29975],
        [1.0, 0.0, 0.0, 0.0, 0.36065, 0.0],
    ]
)
# Pose of the gripper tip (ee_gripper_link) at home (all joints zero), in the base frame.
HOME_M = np.array(
    [
        [1.0, 0.0, 0.0, 0.458325],
        [0.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.36065],
        [0.0, 0.0, 0.0, 1.0],
    ]
)

# Joint chain: offset of each joint's frame from its parent's (m) and its axis, base to tip.
JOINT_OFFSETS = (
    (0.0, 0.0, 0.072),  # waist, from the base
    (0.0, 0.0, 0.03865),  # shoulder
    (0.04975, 0.0, 0.25),  # elbow
    (0.175, 0.0, 0.0),  # forearm_roll
    (0.075, 0.0, 0.0),  # wrist_angle
    (0.065, 0.0, 0.0),  # wrist_rotate
)
JOINT_AXES = ((0, 0, 1), (0, 1, 0), (0, 1, 0), (1, 0, 0), (0, 1, 0), (1, 0, 0))
# wrist_rotate -> gripper bar -> fingers -> ee_gripper_link, all along x.
TIP_OFFSET = (0.043 + 0.023 + 0.027575, 0.0, 0.0)

JOINT_LIMITS = np.array(
    [
        [-np.pi, np.pi],
        np.deg2rad([-108.0, 114.0]),
        np.deg2rad([-123.0, 92.0]),
        [-np.pi, np.pi],
        np.deg2rad([-100.0, 123.0]),
        [-np.pi, np.pi],
    ]
)
FINGER_RANGE = (0.015, 0.037)  # m, each finger's slide joint (closed, open)
SLEEP_POSE = np.array([0.0, -1.80, 1.55, 0.0, 0.8, 0.0])
HOME_POSE = np.zeros(6)


def twist_exp(screw: np.ndarray, theta: float) -> np.ndarray:
    """Matrix exponential of the screw axis (omega; v) times theta, as a 4x4 transform."""
    omega, v = screw[:3], screw[3:]
    out = np.eye(4)
    rot = rotvec_to_matrix(omega * theta)
    k = skew(omega)
    # unit-omega closed form (Modern Robotics, eq. 3.88); every WidowX joint is revolute
    g = np.eye(3) * theta + (1.0 - np.cos(theta)) * k + (theta - np.sin(theta)) * (k @ k)
    out[:3, :3] = rot
    out[:3, 3] = g @ v
    return out


def fk(q: np.ndarray) -> np.ndarray:
    """4x4 pose of the gripper tip in the base frame for 6 arm joint angles (rad)."""
    q = np.asarray(q, dtype=np.float64)
    if q.shape != (6,):
        raise ValueError(f"expected 6 arm joint angles {JOINT_NAMES}, got shape {q.shape}")
    out = np.eye(4)
    for screw, theta in zip(SCREW_AXES, q, strict=True):
        out = out @ twist_exp(screw, theta)
    return out @ HOME_M


def within_limits(q: np.ndarray, tol: float = 1e-9) -> bool:
    """Whether 6 arm joint angles lie inside the joint limits."""
    q = np.asarray(q)
    return bool(np.all(q >= JOINT_LIMITS[:, 0] - tol) and np.all(q <= JOINT_LIMITS[:, 1] + tol))
