"""Action bounds, workspace clipping, the sticky gripper and pose helpers shared with the real robot."""

import warnings

import numpy as np
import pytest

from robot_client import safety
from robot_client.transforms import (
    GRIPPER_DOWN,
    ee_state_to_pose,
    matrix_to_rotvec,
    matrix_to_rpy,
    pose_to_ee_state,
    rotvec_to_matrix,
    rpy_to_matrix,
)


def test_clip_action_bounds_each_axis():
    a = safety.clip_action(np.array([0.2, -0.2, 0.01, 1.0, -1.0, 0.1, 3.0]))
    np.testing.assert_allclose(a, [0.05, -0.05, 0.01, 0.25, -0.25, 0.1, 1.0])


@pytest.mark.parametrize("bad", [np.zeros(6), np.array([np.nan, 0, 0, 0, 0, 0, 1.0])])
def test_clip_action_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        safety.clip_action(bad)


def test_workspace_clipping_and_target_pose():
    np.testing.assert_allclose(safety.clip_to_workspace([0.0, 0.5, -0.3]), [0.1, 0.25, -0.01])
    current = np.eye(4)
    current[:3, :3] = GRIPPER_DOWN
    current[:3, 3] = [0.44, 0.0, 0.0]
    target = safety.target_pose(current, np.array([0.05, 0.02, -0.05, 0, 0, 0.1, 1]))
    np.testing.assert_allclose(target[:3, 3], [0.45, 0.02, -0.01])  # x and z clipped to the box
    # the rotation delta is about the base z axis, applied on the left
    np.testing.assert_allclose(
        target[:3, :3], rpy_to_matrix([0, 0, 0.1]) @ GRIPPER_DOWN, atol=1e-12
    )


def test_sticky_gripper_needs_consistent_commands():
    g = safety.StickyGripper(consistent_steps=2)
    assert [g(x) for x in (0.9, 0.2, 0.8, 0.3, 0.1, 0.4, 0.6, 0.7)] == [1, 1, 1, 1, 0, 0, 0, 1]
    g.reset(0.0)
    assert g(0.49) == 0.0 and g(0.5) == 0.0 and g(0.5) == 1.0
    with pytest.raises(ValueError):
        safety.StickyGripper(consistent_steps=0)


def test_rotations_are_the_extrinsic_xyz_convention_by_hand():
    r, p, y = 0.3, -0.7, 1.9
    rx = np.array([[1, 0, 0], [0, np.cos(r), -np.sin(r)], [0, np.sin(r), np.cos(r)]])
    ry = np.array([[np.cos(p), 0, np.sin(p)], [0, 1, 0], [-np.sin(p), 0, np.cos(p)]])
    rz = np.array([[np.cos(y), -np.sin(y), 0], [np.sin(y), np.cos(y), 0], [0, 0, 1]])
    np.testing.assert_allclose(rpy_to_matrix([r, p, y]), rz @ ry @ rx, atol=1e-15)
    axis = np.array([1.0, 2.0, -2.0]) / 3.0
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    rodrigues = np.eye(3) + np.sin(0.8) * k + (1 - np.cos(0.8)) * k @ k
    np.testing.assert_allclose(rotvec_to_matrix(0.8 * axis), rodrigues, atol=1e-15)
    # gimbal lock: yaw is 0 and roll carries roll - yaw, without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        locked = matrix_to_rpy(rpy_to_matrix([0.5, np.pi / 2, 0.2]))
    np.testing.assert_allclose(locked, [0.3, np.pi / 2, 0.0], atol=1e-7)


def test_rotation_round_trips():
    rng = np.random.default_rng(0)
    for _ in range(50):
        rpy = rng.uniform([-np.pi, -1.5, -np.pi], [np.pi, 1.5, np.pi])
        np.testing.assert_allclose(matrix_to_rpy(rpy_to_matrix(rpy)), rpy, atol=1e-9)
        w = rng.normal(size=3)
        w *= rng.uniform(0, np.pi - 1e-3) / np.linalg.norm(w)
        np.testing.assert_allclose(matrix_to_rotvec(rotvec_to_matrix(w)), w, atol=1e-7)
    near_pi = np.array([0.0, 0.0, np.pi - 1e-6])
    np.testing.assert_allclose(matrix_to_rotvec(rotvec_to_matrix(near_pi)), near_pi, atol=1e-5)
    state = np.array([0.3, 0.0, 0.15, 0.1, -0.2, 0.3])
    np.testing.assert_allclose(pose_to_ee_state(ee_state_to_pose(state)), state, atol=1e-12)
    # gripper down is the zero of Bridge's angles, far from the pitch = 90 deg singularity
    pose = np.eye(4)
    pose[:3, :3] = GRIPPER_DOWN
    np.testing.assert_allclose(pose_to_ee_state(pose)[3:], 0.0, atol=1e-12)


def test_client_package_stays_light():
    import subprocess
    import sys

    code = (
        "import sys, robot_client.safety, robot_client.transforms, robot_client.sim.scoring, robot_client.sim;"
        "heavy = [m for m in ('jax', 'flax', 'fastapi', 'mujoco') if m in sys.modules];"
        "print(heavy); sys.exit(bool(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
