"""GCIQL: relabeled rewards, the target network, and values that order states by distance."""

from __future__ import annotations

import jax
import numpy as np

from mqe_model.agents import gciql
from mqe_model.data.dataset import Dataset
from mqe_model.data.relabel import RelabelConfig, RelabelSampler


def _chain_dataset(length=12, episodes=20):
    # States are one-hot positions on a line walked left to right: V(s, g) must fall with distance.
    obs = np.tile(np.eye(length, dtype=np.float32), (episodes, 1))
    actions = np.ones((len(obs), 1), np.float32)
    terminals = np.zeros(len(obs), bool)
    terminals[length - 1 :: length] = True
    return Dataset(obs, actions, terminals)


def test_rewards_are_zero_exactly_at_the_goal():
    data = _chain_dataset()
    sampler = RelabelSampler(data, RelabelConfig(True, 0.9, 0.3, 0.5, 0.2))
    batch = sampler.sample(np.random.default_rng(0), 512)
    # Success is by index (as OGBench): the same state seen in another episode is not a success.
    success = batch["rewards"] == 0
    same_state = np.all(batch["value_goals"] == batch["observations"], axis=1)
    assert np.all(same_state[success]) and set(np.unique(batch["rewards"])) == {-1.0, 0.0}
    assert np.array_equal(batch["masks"], 1.0 - success)
    assert 0.25 < success.mean() < 0.36  # p_current, plus rare random hits


def test_values_separate_goals_and_target_follows():
    config = gciql.get_config("tiny")
    data = _chain_dataset()
    sampler = RelabelSampler(data, RelabelConfig(True, config.gamma, config.p_current_goal,
                                                 config.p_trajectory_goal, config.p_random_goal))
    rng = np.random.default_rng(0)
    agent = gciql.GCIQLAgent.create(0, sampler.sample(rng, 2), config)
    initial_target = agent.target_critic
    for _ in range(10):
        batches = [sampler.sample(rng, config.batch_size) for _ in range(30)]
        agent, info = agent.update_many({k: np.stack([b[k] for b in batches]) for k in batches[0]})
    assert np.isfinite(info["value/loss"]) and int(agent.step) == 300
    moved = jax.tree_util.tree_map(lambda a, b: np.abs(a - b).max(), agent.target_critic, initial_target)
    assert max(jax.tree_util.tree_leaves(moved)) > 0
    eye = np.eye(12, dtype=np.float32)
    # 300 updates separate reaching the goal (reward 0) from the far end of the chain; the slow
    # multi-step propagation of IQL orders the goals in between only later.
    value = gciql.Value(config).apply({"params": agent.params["value"]}, eye[[0, 0]], eye[[0, 11]])
    assert value[0] > value[1] + 1.0
    actions = agent.sample_actions(eye[:2], eye[5:7], jax.random.PRNGKey(0))
    assert actions.shape == (2, 1)


def test_bridge_preset_matches_the_reference_settings():
    c = gciql.get_config("bridge")
    assert (c.gamma, c.expectile, c.temperature, c.tau, c.encoder) == (0.98, 0.7, 1.0, 0.002, "resnet34")
