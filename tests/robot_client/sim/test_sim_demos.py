"""Each scripted primitive succeeds >= 95% of the time without noise (the issue's bar)."""

import numpy as np
import pytest

from robot_client.sim import demos

SEEDS = range(40)


@pytest.fixture(scope="module")
def blind_env():
    from robot_client.sim import SimConfig, WidowXSimEnv

    e = WidowXSimEnv(seed=0, config=SimConfig(render_observations=False))  # no images: 3x faster
    yield e
    e.close()


@pytest.mark.slow
@pytest.mark.parametrize("primitive", demos.PRIMITIVES)
def test_primitive_success_rate(blind_env, primitive):
    results = []
    for seed in SEEDS:
        index, rng, place_xy = demos.reset_for(blind_env, primitive, seed)
        episode = demos.run_primitive(blind_env, primitive, index, rng, record=False, place_xy=place_xy)
        results.append(episode.success)
    rate = np.mean(results)
    assert rate >= 0.95, f"{primitive}: {rate:.0%} over {len(results)} seeds"


def test_recorded_episode_is_consistent(env):
    index, rng, place_xy = demos.reset_for(env, "pnp_plate", 2)
    ep = demos.run_primitive(env, "pnp_plate", index, rng, noise=0.1, place_xy=place_xy)
    n = len(ep.actions)
    assert ep.success and 10 < n < 120
    assert ep.images.shape == (n, 128, 128, 3) and ep.proprio.shape == (n, 7)
    assert np.all(np.abs(ep.actions[:, :3]) <= 0.05 + 1e-6) and np.all(
        np.abs(ep.actions[:, 3:6]) <= 0.25 + 1e-6
    )
    assert set(np.unique(ep.actions[:, 6])) <= {0.0, 1.0}
    # the gripper closes on the object and lets go of it on the plate
    g = ep.actions[:, 6]
    assert g[0] == 1.0 and g.min() == 0.0 and g[-1] == 1.0
    np.testing.assert_array_equal(ep.actions[-1, :6], 0.0)  # the final step holds still


@pytest.mark.parametrize("primitive", demos.PRIMITIVES)
def test_episode_ends_as_a_goal_image_shows_the_arm(blind_env, primitive):
    """The last frame has the arm back at the reset pose, gripper open, as the twin's goal images."""
    from robot_client import safety

    index, rng, place_xy = demos.reset_for(blind_env, primitive, 5)
    episode = demos.run_primitive(blind_env, primitive, index, rng, noise=0.1, record=False, place_xy=place_xy)
    assert episode.success
    assert np.linalg.norm(blind_env.ee_pose()[:3, 3] - safety.RESET_XYZ) < 0.006
    assert blind_env.gripper_command == 1.0 and blind_env.gripper_opening() > 0.9


@pytest.mark.parametrize("task", ["double_pnp", "triple_pnp", "open_drawer_place"])
@pytest.mark.parametrize("seed", [0, 3])
def test_chained_primitives_earn_full_points(task, seed):
    """Scorers on real physics: chaining the demonstrators solves the composite tasks."""
    from robot_client.sim import SimConfig, WidowXSimEnv

    env = WidowXSimEnv(task=task, seed=seed, config=SimConfig(render_observations=False))
    env.reset()
    rng = np.random.default_rng(0)
    points = []
    for primitive, index, place_xy in demos.solution(env):
        demos.run_primitive(env, primitive, index, rng, record=False, place_xy=place_xy)
        points.append(env.score())
    assert points == list(range(1, len(points) + 1))
    env.close()


@pytest.mark.parametrize("seed", range(6))
def test_plate_scenes_start_part_way_through_a_plate_task(blind_env, seed):
    """Objects set down in the first k slots of an n-object plate layout stay there; the object
    to move goes to slot k, and the episode keeps the others on the plate."""
    from robot_client.sim import layout as L
    from robot_client.sim import scoring

    index, rng, place_xy = demos.reset_for(blind_env, "pnp_plate", seed)
    state = blind_env.scene_state()
    before = [i for i in range(len(L.OBJECTS)) if scoring.on_plate(state, i)]
    assert index not in before
    if place_xy is None:
        assert before == []  # a one-object layout: the plate is empty
    else:
        distance = np.linalg.norm(place_xy - blind_env.layout.plate_xy)
        assert 0.015 < distance < 0.03 and len(before) < len(L.OBJECTS)
    episode = demos.run_primitive(blind_env, "pnp_plate", index, rng, record=False, place_xy=place_xy)
    after = blind_env.scene_state()
    assert episode.success == all(scoring.on_plate(after, i) for i in [*before, index])


def test_plate_scenes_cover_every_number_of_objects_already_placed(blind_env):
    from robot_client.sim import layout as L
    from robot_client.sim import scoring

    counts = set()
    for seed in range(40):
        demos.reset_for(blind_env, "pnp_plate", seed)
        state = blind_env.scene_state()
        counts.add(sum(scoring.on_plate(state, i) for i in range(len(L.OBJECTS))))
    assert counts == {0, 1, 2, 3}
