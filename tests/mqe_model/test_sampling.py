import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqe_model.data.dataset import Dataset, DatasetError
from mqe_model.data.relabel import RelabelConfig, RelabelSampler
from mqe_model.data.sampling import GoalSampler, SamplerConfig, sample_offsets


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(1, 50), min_size=1, max_size=64),
    st.floats(0.5, 0.999),
    st.floats(0.1, 0.99),
    st.floats(0.0, 1.0),
    st.integers(0, 2**31),
)
def test_offsets_respect_caps(steps_to_end, gamma, lam, p, seed):
    steps = np.array(steps_to_end)
    goal, waypoint = sample_offsets(np.random.default_rng(seed), steps, gamma, lam, p)
    assert np.all(1 <= waypoint) and np.all(waypoint <= goal) and np.all(goal <= steps)


def test_goal_offset_mean_far_from_the_end():
    gamma, n = 0.99, 200_000
    goal, _ = sample_offsets(np.random.default_rng(0), np.full(n, 10**9), gamma, 0.95, 0.2)
    # Geom(1 - gamma) has mean 1 / (1 - gamma) = 100 and sd sqrt(gamma) / (1 - gamma) ~ 99.5.
    assert goal.mean() == pytest.approx(100.0, abs=4 * 99.5 / np.sqrt(n))


def test_probability_of_next_state_waypoint():
    gamma, lam, p, n = 0.999, 0.95, 0.2, 400_000
    _, waypoint = sample_offsets(np.random.default_rng(1), np.full(n, 10**9), gamma, lam, p)
    # k' = 1 when chosen directly (p), or when Geom(1 - lam) = 1, or when capped by K = 1.
    expected = p + (1 - p) * ((1 - lam) + lam * (1 - gamma))
    sd = np.sqrt(expected * (1 - expected) / n)
    assert (waypoint == 1).mean() == pytest.approx(expected, abs=4 * sd)


def test_last_transition_forces_unit_offsets():
    goal, waypoint = sample_offsets(np.random.default_rng(2), np.ones(1000, int), 0.99, 0.95, 0.2)
    assert np.all(goal == 1) and np.all(waypoint == 1)


def test_states_without_future_are_refused():
    with pytest.raises(ValueError, match="steps_to_end must be >= 1"):
        sample_offsets(np.random.default_rng(0), np.array([3, 0]), 0.99, 0.95, 0.2)


def test_waypoint_cap_clips_the_same_draws():
    steps = np.random.default_rng(3).integers(1, 400, 20_000)
    goal, waypoint = sample_offsets(np.random.default_rng(4), steps, 0.995, 0.99, 0.2)
    capped_goal, capped = sample_offsets(np.random.default_rng(4), steps, 0.995, 0.99, 0.2, max_waypoint_offset=30)
    np.testing.assert_array_equal(capped_goal, goal)  # goals are not capped
    np.testing.assert_array_equal(capped, np.minimum(waypoint, 30))
    assert waypoint.max() > 30 and capped.max() == 30


def test_probability_of_a_waypoint_at_the_cap():
    gamma, lam, p, cap, n = 0.995, 0.99, 0.2, 40, 400_000
    _, waypoint = sample_offsets(np.random.default_rng(5), np.full(n, 10**9), gamma, lam, p, max_waypoint_offset=cap)
    # k' = cap when neither geometric draw (waypoint, goal) ended before it: P(both >= cap) = (lam gamma)^(cap - 1)
    expected = (1 - p) * (lam * gamma) ** (cap - 1)
    assert (waypoint == cap).mean() == pytest.approx(expected, abs=4 * np.sqrt(expected * (1 - expected) / n))


def test_goal_cap_clips_the_same_draws_and_the_waypoints_under_them():
    steps = np.random.default_rng(3).integers(1, 400, 20_000)
    goal, waypoint = sample_offsets(np.random.default_rng(4), steps, 0.995, 0.99, 0.2)
    capped_goal, capped = sample_offsets(np.random.default_rng(4), steps, 0.995, 0.99, 0.2, max_goal_offset=50)
    np.testing.assert_array_equal(capped_goal, np.minimum(goal, 50))
    assert goal.max() > 50 and capped_goal.max() == 50 and np.all(capped <= capped_goal)
    # a waypoint under the cap is the same draw; one above it is clipped to the capped goal
    np.testing.assert_array_equal(capped, np.minimum(waypoint, capped_goal))


def test_a_goal_cap_acts_as_a_trajectory_end():
    cap, n, settings = 60, 50_000, (0.995, 0.99, 0.2)
    capped = sample_offsets(np.random.default_rng(7), np.full(n, 10**6), *settings, max_goal_offset=cap)
    ended = sample_offsets(np.random.default_rng(7), np.full(n, cap), *settings)
    for a, b in zip(capped, ended, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["max_waypoint_offset", "max_goal_offset"])
def test_a_negative_cap_is_refused(name):
    with pytest.raises(ValueError, match=f"{name} -1"):
        sample_offsets(np.random.default_rng(0), np.array([3]), 0.99, 0.95, 0.2, **{name: -1})


def trajectories(lengths: list[int]) -> Dataset:
    """Observation = (trajectory id, time index), so tests can read where each sample came from."""
    obs, terminals = [], []
    for traj, length in enumerate(lengths):
        obs += [(traj, t) for t in range(length)]
        terminals += [False] * (length - 1) + [True]
    n = len(obs)
    return Dataset(
        observations=np.array(obs, np.float32),
        actions=np.zeros((n, 2), np.float32),
        terminals=np.array(terminals),
    )


def test_sampler_stays_inside_trajectories():
    data = trajectories([5, 2, 30, 3])
    sampler = GoalSampler(data, SamplerConfig(gamma=0.9, lam=0.8, p_next=0.2))
    batch = sampler.sample(np.random.default_rng(3), 5000)
    s, w, g, ag = (batch[k] for k in ("observations", "waypoints", "goals", "actor_goals"))
    for other in (w, g, ag):
        np.testing.assert_array_equal(other[:, 0], s[:, 0])  # same trajectory
        assert np.all(other[:, 1] > s[:, 1])  # strictly in the future
    np.testing.assert_array_equal(w[:, 1] - s[:, 1], batch["waypoint_offsets"])
    assert np.all(w[:, 1] <= g[:, 1])
    lengths = np.array([5, 2, 30, 3])
    assert np.all(s[:, 1] < lengths[s[:, 0].astype(int)] - 1)  # never the last state


def test_actor_goals_are_uniform_over_the_future():
    data = trajectories([11])
    sampler = GoalSampler(data, SamplerConfig(gamma=0.9, lam=0.8, p_next=0.2))
    batch = sampler.sample(np.random.default_rng(4), 60_000)
    first = batch["observations"][:, 1] == 0
    offsets = batch["actor_goals"][first, 1].astype(int)
    counts = np.bincount(offsets, minlength=11)[1:]
    assert counts.min() > 0.8 * counts.mean()  # 10 equally likely futures


@pytest.mark.parametrize("sampler_of", [
    lambda data, p: GoalSampler(data, SamplerConfig(0.9, 0.8, 0.2, p_random_actor_goal=p)),
    lambda data, p: RelabelSampler(data, RelabelConfig(False, p_random_actor_goal=p)),
    lambda data, p: RelabelSampler(data, RelabelConfig(True, 0.9, 0.2, 0.5, 0.3, p_random_actor_goal=p)),
], ids=["mqe", "gcbc", "gciql"])
def test_random_actor_goals_cover_the_dataset_at_their_rate(sampler_of):
    lengths, p, n = [4, 6, 3, 7], 0.3, 40_000
    batch = sampler_of(trajectories(lengths), p).sample(np.random.default_rng(5), n)
    s, ag = batch["observations"].astype(int), batch["actor_goals"].astype(int)
    traj_lengths = np.array(lengths)[s[:, 0]]
    in_future = (ag[:, 0] == s[:, 0]) & (ag[:, 1] > s[:, 1])
    # A random goal is any of the 20 states, so it falls in the state's own future now and then.
    expected = 1 - p + p * np.mean((traj_lengths - 1 - s[:, 1]) / sum(lengths))
    assert in_future.mean() == pytest.approx(expected, abs=4 * np.sqrt(expected * (1 - expected) / n))
    index = np.cumsum([0, *lengths[:-1]])[ag[:, 0]] + ag[:, 1]
    assert np.bincount(index, minlength=sum(lengths)).min() > 0  # every state of the dataset is drawn


def test_without_random_actor_goals_the_batches_are_unchanged():
    data = trajectories([5, 2, 30, 3])
    old = GoalSampler(data, SamplerConfig(0.9, 0.8, 0.2)).sample(np.random.default_rng(6), 500)
    new = GoalSampler(data, SamplerConfig(0.9, 0.8, 0.2, 0.0)).sample(np.random.default_rng(6), 500)
    for key in old:
        np.testing.assert_array_equal(old[key], new[key])
    with_random = GoalSampler(data, SamplerConfig(0.9, 0.8, 0.2, 1.0)).sample(np.random.default_rng(6), 500)
    assert not np.array_equal(with_random["actor_goals"], old["actor_goals"])


def test_dataset_rejects_single_step_trajectories():
    with pytest.raises(DatasetError, match="trajectory 1 has 1 step"):
        trajectories([3, 1, 4])
