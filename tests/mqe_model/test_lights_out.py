import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqe_model.toy.lights_out import (
    LightsOut,
    LightsOutConfig,
    random_press_dataset,
    train_and_evaluate,
)


def test_press_counts_follow_the_boards_algebra():
    """3x3's toggle map is invertible, so each pattern has one press set and the counts are binomial;
    4x4's has rank 12 (puzzle-4x4: 4096 reachable patterns, none more than 7 presses away)."""
    three = LightsOut(3)
    assert len(three.reachable) == 512
    assert np.bincount(three.presses).tolist() == [1, 9, 36, 84, 126, 126, 84, 36, 9, 1]
    four = LightsOut(4)
    assert len(four.reachable) == 4096 and four.presses.max() == 7
    assert np.bincount(four.presses[four.reachable]).tolist() == [1, 16, 120, 560, 1387, 1440, 540, 32]
    # Buttons 0 and 5 share lights 1 and 4, so pressing both flips 0, 5, 6 and 9; no single press does that.
    assert four.distance(np.array([0]), np.array([four.masks[0] ^ four.masks[5]])).tolist() == [2]
    assert int(four.masks[0] ^ four.masks[5]) == 1 << 0 | 1 << 5 | 1 << 6 | 1 << 9


def test_an_action_presses_the_button_it_points_at():
    board = LightsOut(4)
    # (-0.9, -0.9) is the corner button 0: it flips lights 0, 1 and 4 (the one right of it and the one below).
    assert board.step(np.array([0]), np.array([[-0.9, -0.9]])).tolist() == [0b10011]
    assert board.button(np.array([[1.0, 1.0], [-1.0, 1.0], [0.01, -0.01]])).tolist() == [15, 3, 9]
    # Each button's centre action presses that button.
    assert board.button(board.button_actions).tolist() == list(range(16))


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 4095), st.integers(0, 4095), st.integers(0, 4095))
def test_distances_are_a_metric_on_the_reachable_patterns(a, b, c):
    board = LightsOut(4)
    s, g, h = board.reachable[[a, b, c]]
    d = lambda x, y: int(board.distance(np.array([x]), np.array([y]))[0])  # noqa: E731
    assert d(s, g) == d(g, s) >= 0 and (d(s, g) == 0) == (s == g)
    assert d(s, h) <= d(s, g) + d(g, h)


def test_successor_distance_is_the_random_press_walks_own():
    """On 2x2 (16 patterns) the Walsh-Hadamard closed form equals the discounted occupancy summed step by step."""
    board, gamma = LightsOut(2), 0.9
    walk, occupancy = np.eye(16)[0], np.zeros(16)
    for k in range(600):
        occupancy += (1 - gamma) * gamma**k * walk
        walk = np.mean([walk[np.arange(16) ^ mask] for mask in board.masks], axis=0)
    expected = np.log(occupancy[0] / occupancy) / -np.log(gamma)
    np.testing.assert_allclose(board.successor_distance(gamma), expected, rtol=1e-10, atol=1e-10)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 4095), st.integers(0, 4095), st.integers(0, 4095), st.sampled_from([0.8, 0.95, 0.995]))
def test_successor_distance_is_a_metric_on_the_reachable_patterns(a, b, c, gamma):
    board = LightsOut(4)
    steps = board.successor_distance(gamma)
    s, g, h = board.reachable[[a, b, c]]
    assert steps[0] == 0 and steps[s ^ g] >= 0 and (steps[s ^ g] == 0) == (s == g)
    assert steps[s ^ h] <= steps[s ^ g] + steps[g ^ h] + 1e-9
    assert np.isinf(steps[board.presses < 0]).all() and np.isfinite(steps[board.reachable]).all()


def test_successor_distance_ranks_3x3_patterns_by_presses():
    """Random presses on 3x3 mix slowly enough that their own successor distance grows with every press."""
    board = LightsOut(3)
    means = [board.successor_distance(0.95)[board.presses == p].mean() for p in range(10)]
    assert means[0] == 0 and (np.diff(means) > 0).all()
    with pytest.raises(ValueError, match="gamma 1.0: must be in"):
        board.successor_distance(1.0)


def test_encodings_carry_the_same_lights():
    board = LightsOut(2)
    states = np.array([0b0000, 0b1010])
    assert board.observe(states, "binary").tolist() == [[0, 0, 0, 0], [0, 1, 0, 1]]
    assert board.observe(states, "signed").tolist() == [[-1, -1, -1, -1], [-1, 1, -1, 1]]
    assert board.observe(states, "onehot").tolist() == [[1, 0] * 4, [1, 0, 0, 1, 1, 0, 0, 1]]


def test_the_index_encoding_numbers_the_reachable_patterns():
    board = LightsOut(4)
    states = board.reachable[[0, 5, 4095]]
    observations = board.observe(states, "index")
    assert observations.shape == (3, 4096) and observations.sum(axis=1).tolist() == [1, 1, 1]
    assert np.argmax(observations, axis=1).tolist() == [0, 5, 4095]
    assert board.patterns(observations, "index").tolist() == states.tolist()
    unreachable = np.setdiff1d(np.arange(1 << 16), board.reachable)[0]
    with pytest.raises(ValueError, match="not reachable on the 4x4 board"):
        board.observe(np.array([states[0], unreachable]), "index")


def test_random_press_data_moves_one_press_a_step():
    board = LightsOut(4)
    data = random_press_dataset(board, np.random.default_rng(0), episodes=30, length=10, encoding="binary")
    lights = (data.observations.astype(np.int64) << np.arange(16)).sum(axis=1).reshape(30, 10)
    assert np.isin(lights[:, 0], board.reachable).all()
    assert (board.distance(lights[:, :-1], lights[:, 1:]) == 1).all()
    assert data.terminals.reshape(30, 10)[:, -1].all() and data.terminals.sum() == 30


def test_distinct_presses_press_every_button_once_a_run():
    board = LightsOut(4)
    data = random_press_dataset(board, np.random.default_rng(1), episodes=5, length=40, encoding="binary",
                                presses="distinct")
    buttons = board.button(data.actions).reshape(5, 40)
    for run in (buttons[:, :16], buttons[:, 16:32]):
        assert (np.sort(run, axis=1) == np.arange(16)).all()
    assert len(set(buttons[:, 32:].ravel())) > 1 and (np.abs(data.actions) <= 1.0).all()
    lights = (data.observations.astype(np.int64) << np.arange(16)).sum(axis=1).reshape(5, 40)
    assert (board.distance(lights[:, :-1], lights[:, 1:]) == 1).all()


def test_bad_settings_are_refused_before_training():
    with pytest.raises(ValueError, match="side 5: must be 2, 3 or 4"):
        LightsOutConfig(side=5)
    with pytest.raises(ValueError, match="must be a multiple of updates_per_dispatch"):
        LightsOutConfig(steps=120, updates_per_dispatch=50)
    with pytest.raises(ValueError, match="has no field 'lamb'"):
        LightsOutConfig(set=("lamb=0.9",))


def test_a_short_run_reports_distances_for_every_press_count():
    config = LightsOutConfig(steps=20, updates_per_dispatch=10, side=3, episodes=20, episode_length=8, pairs=300)
    result = train_and_evaluate(config)
    assert set(result.mean_distance_by_presses) <= set(range(10)) and len(result.mean_distance_by_presses) >= 6
    assert all(d >= 0 for d in result.mean_distance_by_presses.values())
    assert 0 < result.num_far_pairs < 300
    assert set(result.action_distance_by_presses) == set(result.mean_distance_by_presses)
    assert -1 <= result.action_spearman <= 1 and result.behaviour_spearman > 0.95
    for rate in (result.critic_greedy_success_far, result.policy_success_far, result.random_success_far):
        assert 0.0 <= rate <= 1.0


def test_an_agent_without_a_critic_is_refused():
    with pytest.raises(ValueError, match="agent 'gcbc': the toys read a critic's distance"):
        LightsOutConfig(agent="gcbc")


def test_a_short_gciql_run_reads_its_value_as_presses():
    config = LightsOutConfig(agent="gciql", steps=20, updates_per_dispatch=10, side=3, episodes=20,
                             episode_length=8, pairs=300)
    result = train_and_evaluate(config)
    assert len(result.mean_distance_by_presses) >= 6
    assert all(d >= 0 for d in result.mean_distance_by_presses.values())
    for rate in (result.critic_greedy_success_far, result.policy_success_far, result.random_success_far):
        assert 0.0 <= rate <= 1.0


@pytest.mark.parametrize("encoding", ["onehot", "binary", "signed"])
def test_patterns_invert_observe(encoding):
    board = LightsOut(3)
    states = np.arange(512)
    assert (board.patterns(board.observe(states, encoding), encoding) == states).all()


def test_fitting_the_presses_needs_mqes_critic():
    with pytest.raises(ValueError, match="target 'presses' fits MQE's quasimetric critic; agent 'gciql' has none"):
        LightsOutConfig(agent="gciql", target="presses")


def test_mqes_critic_fitted_to_the_presses_of_a_2x2_board_ranks_them():
    """With no backup, the MRN over separate psi(s), psi(g) learns the 2x2 board's presses (16 patterns), and
    its greedy press by psi of the next pattern reaches the far ones: the read-out works where the answer
    is representable."""
    result = train_and_evaluate(LightsOutConfig(target="presses", side=2, steps=1000, pairs=500))
    assert result.spearman >= 0.9 and result.policy_success_far is None and result.action_spearman is None
    distances = [result.mean_distance_by_presses[p] for p in sorted(result.mean_distance_by_presses)]
    assert distances[0] < 0.1 and (np.diff(distances) > 0).all()
    assert result.critic_greedy_success_far >= 0.9 > result.random_success_far
