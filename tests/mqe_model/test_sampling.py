import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqe_model.data.dataset import Dataset, DatasetError
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


def test_dataset_rejects_single_step_trajectories():
    with pytest.raises(DatasetError, match="trajectory 1 has 1 step"):
        trajectories([3, 1, 4])
