"""The MJCF model's forward kinematics equal the product of exponentials of the public screw axes."""

import numpy as np
import pytest

from robot_client.sim import kinematics as K


def test_poe_home_and_known_pose():
    np.testing.assert_allclose(K.fk(np.zeros(6)), K.HOME_M, atol=1e-12)
    # shoulder +90 deg tips the straight arm forward about the shoulder axis at z = 0.11065
    T = K.fk(np.array([0, np.pi / 2, 0, 0, 0, 0]))
    np.testing.assert_allclose(T[:3, 3], [0.36065 - 0.11065, 0, 0.11065 - 0.458325], atol=1e-12)
    with pytest.raises(ValueError):
        K.fk(np.zeros(5))


def test_model_fk_matches_poe(env):
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(200):
        q = rng.uniform(K.JOINT_LIMITS[:, 0], K.JOINT_LIMITS[:, 1])
        env.set_joint_positions(q)
        worst = max(worst, float(np.abs(env.ee_pose() - K.fk(q)).max()))
    assert worst < 1e-6


def test_joint_chain_constants_agree():
    # the screw axes follow from the joint offsets: q_i on axis i, v_i = -omega_i x q_i
    origin = np.zeros(3)
    for i, (off, axis) in enumerate(zip(K.JOINT_OFFSETS, K.JOINT_AXES, strict=True)):
        origin = origin + np.array(off)
        np.testing.assert_allclose(K.SCREW_AXES[i, 3:], -np.cross(axis, origin), atol=1e-12)
    np.testing.assert_allclose(origin + K.TIP_OFFSET, K.HOME_M[:3, 3], atol=1e-12)


def test_set_joint_positions_checks_limits(env):
    with pytest.raises(ValueError, match="outside the limits"):
        env.set_joint_positions(np.array([0, 3.0, 0, 0, 0, 0]))
