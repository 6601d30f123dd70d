"""The agents by name. Each module holds one whole algorithm and the same names, which is all the train
loop, checkpoints and the policy loader use, so they never branch on the agent:

| name | what |
| --- | --- |
| `Config` | its frozen config dataclass; `get_config(preset)` gives the named presets |
| `Agent` | the immutable flax pytree: `create`, `update`, `update_many`, `sample_actions` |
| `make_sampler(dataset, config)` | the batch sampler it trains on |
| `inference_fns(config, action_dim)` | pure `(encode_goals, act)` for serving and evaluation |
| `HAS_DISTANCE` | whether `act` answers a temporal distance (else NaN) |
| `REMOVED_FIELDS` | config fields older checkpoints may carry, and the value each must have |
"""

from __future__ import annotations

from types import ModuleType

from mqe_model.agents import gcbc, gciql, mqe

AGENTS: dict[str, ModuleType] = {"mqe": mqe, "gcbc": gcbc, "gciql": gciql}


def get(name: str) -> ModuleType:
    """The module of agent `name`, or a ValueError listing the known ones."""
    if name not in AGENTS:
        raise ValueError(f"unknown agent {name!r}; choose one of {list(AGENTS)}")
    return AGENTS[name]
