"""What the stitch diagnostics here share: a vmapped MQE run's latest checkpoint, split by seed."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from mqe_model import checkpoints
from mqe_model.evaluation import compiled_policy


@dataclasses.dataclass(frozen=True)
class VmappedRun:
    """A run's checkpoint: metadata, the jitted goal encoder and act, and each seed's params."""

    metadata: dict[str, Any]
    encode: Callable
    policy: Callable
    seed_params: list[Any]


def load(run: Path) -> VmappedRun:
    """The latest checkpoint of `run` (a run dir, checkpoints root or step dir), params split by seed."""
    step_dir = checkpoints.resolve_step_dir(run)
    metadata = checkpoints.read_metadata(step_dir)
    params = checkpoints.restore_params(step_dir)
    seeds = int(metadata.get("num_seeds", 1))
    encode, policy = compiled_policy("mqe", json.dumps({k: metadata[k] for k in ("config", "action_stats")},
                                                       sort_keys=True))
    per_seed = [params] if seeds == 1 else [jax.tree_util.tree_map(lambda x, k=k: x[k], params) for k in range(seeds)]
    return VmappedRun(metadata, encode, policy, per_seed)
