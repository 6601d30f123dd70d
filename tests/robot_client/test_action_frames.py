"""What an action's delta is added to: the measured pose, or the previous target (Bridge's controller)."""

from __future__ import annotations

import numpy as np
import pytest
from fake_interbotix import FakeWorld
from widowx_helpers import connected, run_trial

from robot_client import safety
from robot_client.loop import LoopSettings
from robot_client.robots.widowx import reset_pose_matrix
from robot_client.robots.widowx_faults import FaultLimits

DX = 0.01


def forward(step: int) -> np.ndarray:
    """1 cm along x per step, or NaN (no valid action: the arm holds) at step 4."""
    if step == 4:
        return np.full(7, np.nan)
    return np.array([DX, 0, 0, 0, 0, 0, 1.0])


@pytest.fixture
def lagging_world():
    w = FakeWorld(ros=2, lag_s=0.15)  # the arm trails its target by most of a 0.1 s step
    yield w
    w.close()


def xyz(steps, key):
    return np.array([s[key] for s in steps if key in s])


def test_measured_frame_adds_each_delta_to_where_the_arm_is(monkeypatch, lagging_world, tmp_path):
    robot = connected(monkeypatch, lagging_world)
    _, steps = run_trial(robot, tmp_path, forward, steps=10, action_frame="measured")
    for s in steps:
        if "target_xyz" in s:
            assert np.allclose(s["target_xyz"], np.add(s["ee_xyz"], [DX, 0, 0]), atol=1e-5)
            assert "origin_xyz" not in s


def test_previous_target_frame_integrates_targets_as_bridge_does(monkeypatch, lagging_world, tmp_path):
    robot = connected(monkeypatch, lagging_world)
    outcome, steps = run_trial(robot, tmp_path, forward, steps=10, action_frame="previous_target")
    targets = xyz(steps, "target_xyz")
    start = np.array(steps[0]["ee_xyz"])
    # steps 0-3: where the trial started plus k deltas, whatever the lagging arm measured since
    assert np.allclose(targets[:4], start + np.outer(np.arange(1, 5), [DX, 0, 0]), atol=1e-5)
    assert steps[4]["flags"]["held"] and "target_xyz" not in steps[4]
    # after the hold the next delta starts from the measured pose again
    assert np.allclose(steps[5]["target_xyz"], np.add(steps[5]["ee_xyz"], [DX, 0, 0]), atol=1e-5)
    assert np.allclose(np.diff(targets[4:], axis=0), [DX, 0, 0], atol=1e-5)
    assert outcome.counters.lead_clipped == 0


def test_previous_target_covers_the_commanded_ground_and_measured_falls_short(monkeypatch, tmp_path):
    travelled = {}
    for frame in safety.ACTION_FRAMES:
        world = FakeWorld(ros=2, lag_s=0.15)
        (tmp_path / frame).mkdir()
        try:
            robot = connected(monkeypatch, world)
            _, steps = run_trial(robot, tmp_path / frame, lambda step: np.array([DX, 0, 0, 0, 0, 0, 1.0]),
                                 steps=10, action_frame=frame)
            travelled[frame] = steps[-1]["ee_xyz"][0] - steps[0]["ee_xyz"][0]
        finally:
            world.close()
    # nine steps of 1 cm between the first and the last observation; the arm trails by ~2 steps
    assert 5 * DX < travelled["previous_target"] <= 9 * DX + 1e-6
    assert travelled["measured"] < travelled["previous_target"] / 2


def test_a_target_far_ahead_of_the_arm_is_pulled_back(monkeypatch, tmp_path):
    world = FakeWorld(ros=2, lag_s=0.5)  # an arm that hardly follows (and draws the current for it)
    try:
        robot = connected(monkeypatch, world, faults=FaultLimits(effort_limits_ma=(1e5,) * 6))
        outcome, steps = run_trial(robot, tmp_path, lambda step: np.array([0, 0.04, 0, 0, 0, 0, 1.0]),
                                   steps=6, action_frame="previous_target")
    finally:
        world.close()
    assert outcome.counters.lead_clipped >= 2
    for s in steps:
        if "origin_xyz" in s:
            lead = np.subtract(s["origin_xyz"], s["ee_xyz"])
            assert np.all(np.abs(lead) <= safety.MAX_TARGET_LEAD_XYZ + 1e-5)


def test_lead_limit_and_policy_frame():
    measured = reset_pose_matrix()
    target = measured.copy()
    target[:3, 3] += [0.3, -0.01, 0.0]
    origin, pulled = safety.lead_limited(target, measured)
    assert pulled and np.allclose(origin[:3, 3] - measured[:3, 3], [safety.MAX_TARGET_LEAD_XYZ, -0.01, 0.0])
    assert np.array_equal(origin[:3, :3], target[:3, :3])
    assert safety.policy_action_frame({"name": "p"}) == "measured"  # checkpoints that do not say
    assert safety.policy_action_frame({"name": "p", "action_frame": "previous_target"}) == "previous_target"
    with pytest.raises(ValueError, match="policy 'p' declares action_frame 'absolute'; this client applies "
                                         "measured or previous_target: update mqe-deploy"):
        safety.policy_action_frame({"name": "p", "action_frame": "absolute"})
    with pytest.raises(ValueError, match="action_frame 'target' must be one of"):
        LoopSettings(action_frame="target")
