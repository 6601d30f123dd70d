"""The agent table: every agent module answers to the same names, so the pipeline never branches on it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mqe_model.agents import registry
from mqe_model.data.dataset import Dataset


def chain(length: int = 12) -> Dataset:
    """One trajectory along a line, 2-D states and actions."""
    observations = np.stack([np.arange(length), np.zeros(length)], axis=1).astype(np.float32)
    terminals = np.zeros(length, bool)
    terminals[-1] = True
    return Dataset(observations=observations, actions=np.ones((length, 2), np.float32), terminals=terminals)


@pytest.mark.parametrize("name", list(registry.AGENTS))
def test_each_agent_module_has_the_same_names_and_they_work_together(name):
    module = registry.get(name)
    config = dataclasses.replace(module.get_config("tiny"), batch_size=4)
    assert isinstance(config, module.Config) and dataclasses.is_dataclass(config)
    assert set(module.REMOVED_FIELDS).isdisjoint(f.name for f in dataclasses.fields(module.Config))
    batch = module.make_sampler(chain(), config).sample(np.random.default_rng(0), 4)
    agent = module.Agent.create(0, batch, config)
    agent, info = agent.update(batch)
    assert int(agent.step) == 1 and all(np.isfinite(float(v)) for v in info.values())
    encode_goals, act = module.inference_fns(config, 2)
    actions, distance = act(agent.params, batch["observations"], encode_goals(agent.params, batch["observations"]))
    assert actions.shape == (4, 2) and np.all(np.abs(np.asarray(actions)) <= 1.0)
    assert np.all(np.isfinite(distance)) == module.HAS_DISTANCE


def test_an_unknown_agent_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown agent 'iql'; choose one of \['mqe', 'gcbc', 'gciql'\]"):
        registry.get("iql")
