"""GCBC: the MQE interface, and it imitates the data."""

from __future__ import annotations

import jax
import numpy as np

from mqe_model.agents import gcbc
from mqe_model.data.dataset import Dataset
from mqe_model.data.relabel import RelabelConfig, RelabelSampler


def _linear_dataset():
    # The action is a fixed linear function of (state, goal direction): learnable by BC.
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(400, 4)).astype(np.float32)
    actions = np.tanh(obs[:, :2]).astype(np.float32)
    terminals = np.zeros(400, bool)
    terminals[19::20] = True
    return Dataset(obs, actions, terminals)


def test_interface_and_learning():
    sampler = RelabelSampler(_linear_dataset(), RelabelConfig(with_value_goals=False))
    rng = np.random.default_rng(0)
    config = gcbc.get_config("tiny")
    agent = gcbc.Agent.create(0, sampler.sample(rng, 2), config)
    batches = [sampler.sample(rng, config.batch_size) for _ in range(20)]
    stacked = {k: np.stack([b[k] for b in batches]) for k in batches[0]}
    agent, first = agent.update(batches[0])
    for _ in range(15):
        agent, info = agent.update_many(stacked)
    assert int(agent.step) == 301
    assert info["actor/mse"] < 0.5 * first["actor/mse"]
    batch = batches[0]
    actions = agent.sample_actions(batch["observations"], batch["actor_goals"], jax.random.PRNGKey(0))
    assert actions.shape == batch["actions"].shape and np.all(np.abs(actions) <= 1)
    noisy = agent.sample_actions(batch["observations"], batch["actor_goals"], jax.random.PRNGKey(0), 1.0)
    assert not np.allclose(actions, noisy)


def test_bridge_preset_fuses_observation_and_goal_early():
    config = gcbc.get_config("bridge")
    assert config.encoder == "resnet34" and config.batch_size == 128
    images = np.zeros((1, 32, 32, 3), np.uint8)
    tiny = gcbc.Config(name="t", batch_size=2, actor_hidden_dims=(8,), encoder="resnet_tiny")
    params = gcbc.Actor(tiny, 7).init(jax.random.PRNGKey(0), images, images)["params"]
    kernels = [x for x in jax.tree_util.tree_leaves(params) if x.ndim == 4]
    assert any(k.shape[:3] == (7, 7, 6) for k in kernels)  # stem sees 3 observation + 3 goal channels
