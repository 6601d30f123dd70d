"""The twin's action interface, IK reporting, determinism and rendering."""

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from robot_client import safety
from robot_client.sim import layout as L
from robot_client.transforms import GRIPPER_DOWN, pose_to_ee_state


def _colour_pixels(image: np.ndarray, rgba) -> int:
    """Pixels whose colour is dominated by the object's main channel(s)."""
    img = image.astype(int)
    target = (np.array(rgba[:3]) > 0.5).astype(bool)
    strong = img[..., target].min(axis=-1)
    weak = img[..., ~target].max(axis=-1) if (~target).any() else np.zeros(img.shape[:2])
    return int(np.sum((strong > 120) & (strong - weak > 70)))


def test_reset_pose_and_observation(env):
    obs = env.reset(seed=3)
    pose = env.ee_pose()
    np.testing.assert_allclose(pose[:3, 3], safety.RESET_XYZ, atol=2e-3)
    np.testing.assert_allclose(pose[:3, :3], GRIPPER_DOWN, atol=5e-3)
    assert obs["image"].shape == (128, 128, 3) and obs["image"].dtype == np.uint8
    assert obs["proprio"].shape == (7,) and obs["proprio"][6] > 0.95  # open


def test_delta_action_moves_the_tip_in_the_base_frame(env):
    env.reset(seed=4)
    start = pose_to_ee_state(env.ee_pose())
    for _ in range(3):
        _, _, _, _, info = env.step(np.array([0.03, -0.02, -0.01, 0, 0, 0.1, 1.0]))
        assert not info["ik_failed"]
    end = pose_to_ee_state(env.ee_pose())
    np.testing.assert_allclose(end[:3] - start[:3], [0.09, -0.06, -0.03], atol=4e-3)
    np.testing.assert_allclose(end[5] - start[5], 0.3, atol=0.02)


def test_actions_are_clipped_to_bounds_and_workspace(env):
    env.reset(seed=5)
    _, _, _, _, info = env.step(np.array([0.5, 0, 0, 0, 0, 0, 1.0]))
    assert info["action_applied"][0] == pytest.approx(safety.MAX_DELTA_XYZ)
    for _ in range(8):  # push far past the workspace's top
        env.step(np.array([0, 0, 0.05, 0, 0, 0, 1.0]))
    assert env.ee_pose()[2, 3] == pytest.approx(safety.WORKSPACE_HIGH[2], abs=3e-3)


def test_ik_failure_is_reported_and_the_arm_holds(env):
    env.reset(seed=6)
    before = env.ik_failures
    # tip pointing straight up at the workspace's low corner: outside the wrist's reach
    failed = []
    for _ in range(14):
        q = env.joint_positions()
        _, _, _, _, info = env.step(np.array([0, 0, 0, 0, -0.25, 0, 1.0]))
        failed.append(info["ik_failed"])
        assert (info["ik_failure_reason"] is not None) == info["ik_failed"]
        if info["ik_failed"]:
            np.testing.assert_allclose(env.joint_positions(), q, atol=2e-3)  # did not move
    assert any(failed)
    assert env.ik_failures == before + sum(failed)


def test_sticky_gripper_closes_after_consistent_commands(env):
    env.reset(seed=7)
    _, _, _, _, info = env.step(np.array([0, 0, 0, 0, 0, 0, 0.0]))
    assert info["gripper_command"] == 1.0  # one closing command is not enough (sticky, 2 steps)
    obs, _, _, _, info = env.step(np.array([0, 0, 0, 0, 0, 0, 0.0]))
    assert info["gripper_command"] == 0.0
    obs, *_ = env.step(np.zeros(7))
    assert obs["proprio"][6] < 0.05  # fingers shut on nothing


def test_determinism_for_a_seed():
    from robot_client.sim import WidowXSimEnv

    runs = []
    for _ in range(2):
        e = WidowXSimEnv(task="single_pnp", seed=11)
        frames = [e.reset()["image"]]
        for a in ([0.02, 0.01, -0.03, 0, 0, 0.1, 1], [0.0, 0.03, -0.05, 0.05, 0, 0, 0]):
            frames.append(e.step(np.array(a))[0]["image"])
        runs.append((np.stack(frames), e.data.qpos.copy(), e.reset()["image"]))
        e.close()
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    np.testing.assert_array_equal(runs[0][2], runs[1][2])  # the next reset of the seed sequence too
    assert not np.array_equal(runs[0][0][0], runs[0][2])  # and it is a different scene


def test_frames_show_the_scene(env):
    env.reset(seed=8)
    frame = env.render()
    assert frame.shape == (480, 640, 3) and frame.std() > 20
    for obj in L.OBJECTS:
        assert _colour_pixels(frame, obj.rgba) > 40, f"{obj.name} is not visible"
        assert _colour_pixels(env.render_observation(), obj.rgba) > 2


def test_goal_images_move_the_objects_and_restore_the_state(env):
    env.reset(seed=9)
    qpos = env.data.qpos.copy()
    obs = env.render_observation()
    goal = env.goal_image()
    np.testing.assert_array_equal(env.data.qpos, qpos)
    np.testing.assert_array_equal(env.render_observation(), obs)
    assert np.abs(goal.astype(int) - obs.astype(int)).max() > 100
    # setting the goal state for real scores full points (double_pnp: two objects on the plate)
    from robot_client.sim import scoring

    slots = L.plate_slots(env.layout.plate_xy, 2)
    state = env.scene_state()
    pos = state.objects_pos.copy()
    for i, xy in zip(env.task_objects, slots, strict=True):
        pos[i] = [*xy, L.PLATE_TOP + L.OBJECTS[i].half_height]
    assert (
        scoring.score(
            "double_pnp",
            scoring.SceneState(pos, state.plate_xy, state.drawer_xy, 0.0, env.task_objects),
        )
        == 2
    )


def test_drawer_goal_images_and_the_stop():
    from robot_client.sim import WidowXSimEnv, demos, scoring

    e = WidowXSimEnv(task="open_drawer_place", seed=0)
    e.reset(seed=12)
    assert e.score() == 0
    goal = e.goal_image()
    assert np.abs(goal.astype(int) - e.render_observation().astype(int)).max() > 100
    # grasp the handle as the demonstrator does, then pull far past the stop
    rng = np.random.default_rng(0)
    plan = demos.plan(e, "open_drawer", -1, rng)
    pull = plan[3]
    beyond = pull.xyz - [0.12, 0.0, 0.0]
    for wp in [*plan[:3], dataclasses.replace(pull, xyz=beyond, max_steps=12)]:
        for _ in range(wp.max_steps):
            e.step(demos.waypoint_action(e, wp))
    opening = e.scene_state().drawer_opening
    assert (
        L.DRAWER_OPEN_THRESHOLD <= opening <= L.DRAWER_RANGE[1] + L.DRAWER_STOP_TOLERANCE
    )  # the stop held it
    assert scoring.drawer_open(e.scene_state()) and e.score() == 1
    e.close()


def test_step_before_reset_says_what_to_do():
    from robot_client.sim import WidowXSimEnv

    with pytest.raises(RuntimeError, match=r"Call \.reset\(\) first"):
        WidowXSimEnv(seed=0).step(np.zeros(7))


def test_missing_mujoco_is_one_clear_line():
    code = (
        "import sys; sys.modules['mujoco'] = None\n"
        "from robot_client.sim.datagen import main\n"
        "sys.exit(main(['--out', '/nonexistent-mqe-test', '--episodes', '1']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 1
    assert "mujoco not installed: pip install 'mqe-deploy[sim]'" in out.stderr
    assert "Traceback" not in out.stderr
    code = (
        "import sys; sys.modules['mujoco'] = None\n"
        "import robot_client.sim as sim\n"
        "try:\n    sim.WidowXSimEnv\nexcept RuntimeError as e:\n    print(e)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "mujoco not installed: pip install 'mqe-deploy[sim]'"
