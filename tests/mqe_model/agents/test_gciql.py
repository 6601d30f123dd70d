"""GCIQL: relabeled rewards, the target network, and values that order states by distance."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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
    agent = gciql.Agent.create(0, sampler.sample(rng, 2), config)
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


def _ddpgbc_setup(alpha):
    config = dataclasses.replace(gciql.get_config("tiny"), actor_loss="ddpgbc", alpha=alpha)
    sampler = RelabelSampler(_chain_dataset(), RelabelConfig(True, config.gamma, config.p_current_goal,
                                                               config.p_trajectory_goal, config.p_random_goal))
    batch = {k: jnp.asarray(v) for k, v in sampler.sample(np.random.default_rng(0), 64).items()}
    agent = gciql.Agent.create(0, batch, config)
    frozen = {"critic": agent.params["critic"], "value": agent.params["value"]}
    return config, batch, agent, frozen


def test_ddpgbc_actor_loss_is_normalised_q_plus_weighted_bc():
    config, batch, agent, frozen = _ddpgbc_setup(alpha=0.5)
    loss, info = gciql.ddpgbc_actor_loss(agent.params, frozen, batch, config)
    obs, goals, actions = batch["observations"], batch["actor_goals"], batch["actions"]
    mean = np.asarray(gciql.actor_mean(agent.params, obs, goals, config, 1))
    q = np.asarray(gciql.Critic(config).apply({"params": frozen["critic"]}, obs, goals, np.clip(mean, -1, 1))).min(0)
    log_prob = -0.5 * np.square(np.asarray(actions) - mean).sum(-1) - 0.5 * np.log(2 * np.pi)
    expected = -q.mean() / (np.abs(q).mean() + 1e-6) - 0.5 * log_prob.mean()
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    np.testing.assert_allclose(float(info["actor/q"]), q.mean(), rtol=1e-5)


def test_ddpgbc_q_term_moves_the_actor_uphill_and_only_the_actor():
    config, batch, agent, frozen = _ddpgbc_setup(alpha=0.0)
    grads = jax.grad(lambda p: gciql.ddpgbc_actor_loss(p, frozen, batch, config)[0])(agent.params)
    assert all(np.all(g == 0) for name in ("critic", "value") for g in jax.tree_util.tree_leaves(grads[name]))
    stepped = {**agent.params, "actor": jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, agent.params["actor"],
                                                               grads["actor"])}
    before = gciql.ddpgbc_actor_loss(agent.params, frozen, batch, config)[1]["actor/q"]
    after = gciql.ddpgbc_actor_loss(stepped, frozen, batch, config)[1]["actor/q"]
    assert after > before


def test_ddpgbc_agent_trains_and_bad_actor_losses_are_refused():
    config, batch, agent, _ = _ddpgbc_setup(alpha=1.0)
    agent, info = agent.update(batch)
    assert int(agent.step) == 1 and np.isfinite(info["actor/q_loss"]) and "actor/weight" not in info
    with pytest.raises(ValueError, match="actor_loss='sac': choose one of awr, ddpgbc"):
        dataclasses.replace(config, actor_loss="sac")
    with pytest.raises(ValueError, match="alpha=-1"):
        dataclasses.replace(config, alpha=-1.0)


def test_actor_layer_norm_switches_only_the_policy():
    config = gciql.get_config("tiny")
    names = {}
    for actor_layer_norm in (True, False):
        cfg = dataclasses.replace(config, actor_layer_norm=actor_layer_norm)
        obs = np.zeros((1, 4), np.float32)
        params = gciql.Agent.create(0, {"observations": obs, "actions": np.zeros((1, 2), np.float32)}, cfg).params
        leaf_paths = lambda tree: {"/".join(str(k.key) for k in path) for path, _ in  # noqa: E731
                                   jax.tree_util.tree_leaves_with_path(tree)}
        names[actor_layer_norm] = {part: any("LayerNorm" in p for p in leaf_paths(params[part])) for part in params}
    assert names[True]["actor"] and not names[False]["actor"]
    others = [part for part in names[True] if part != "actor"]
    assert others and all(names[True][p] and names[False][p] for p in others)
