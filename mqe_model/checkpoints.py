"""Checkpoints: orbax `CheckpointManager` with the items `params`, `train_state` and `metadata`.

Layout (one directory per step, written to a temporary name and renamed by orbax when complete):

    <workdir>/checkpoints/<step>/params/        inference weights (what the server loads)
    <workdir>/checkpoints/<step>/train_state/   optimizer state, step, RNG, target networks
    <workdir>/checkpoints/<step>/metadata/metadata   JSON, see `build_metadata`

Serving reads only `params` and `metadata`; resuming reads all three.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import logging
from pathlib import Path
from typing import Any

import flax.serialization
import jax
import orbax.checkpoint as ocp

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
ITEMS = ("params", "train_state", "metadata")
METADATA_FILE = Path("metadata") / "metadata"  # inside a step directory


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable or does not fit the run; the message names the path."""


def package_version() -> str:
    """Installed version of mqe-deploy, or 'unknown' when run from a source tree."""
    try:
        return importlib.metadata.version("mqe-deploy")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_metadata(
    *,
    agent: str,
    config: dict[str, Any],
    step: int,
    action_stats: dict[str, Any],
    image: dict[str, Any] | None,
    observation: dict[str, Any],
    dataset: dict[str, Any],
    train: dict[str, Any],
    num_seeds: int = 1,
    action_frame: str = "measured",
) -> dict[str, Any]:
    """The JSON metadata item: everything needed to act correctly from `params` alone."""
    return {
        "schema_version": SCHEMA_VERSION,
        "agent": agent,  # 'mqe' | 'gcbc' | 'gciql'
        "config": config,  # the agent config, round-trips with agents.configs.config_from_json
        "step": step,  # updates done
        "action_stats": action_stats,  # normalization.ActionStats.to_json()
        "action_frame": action_frame,  # deltas from the "measured" pose or the "previous_target"; absent: measured
        "image": image,  # None for states, else {"height", "width", "resize"}
        "observation": observation,  # {"shape": [...], "dtype": "..."} as the network sees it
        "dataset": dataset,  # {"path", "format", "fingerprint", "num_transitions"}
        "num_seeds": num_seeds,  # > 1: params carry a leading axis of independently trained seeds
        "train": train,  # the full TrainConfig of the run
        "package_version": package_version(),
        "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def make_manager(directory: Path, keep: int = 3, asynchronous: bool = True) -> ocp.CheckpointManager:
    """A manager over `directory` (`<workdir>/checkpoints`) keeping the last `keep` steps."""
    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep, enable_async_checkpointing=asynchronous, create=True
    )
    return ocp.CheckpointManager(directory.absolute(), item_names=ITEMS, options=options)


def split_agent(agent: Any) -> tuple[Any, dict[str, Any]]:
    """(params, train_state): the agent's inference weights and everything else it carries."""
    state = flax.serialization.to_state_dict(agent)
    params = state.pop("params")
    return params, state


def join_agent(template: Any, params: Any, train_state: dict[str, Any]) -> Any:
    """Inverse of `split_agent` onto a freshly created agent of the same shapes."""
    return flax.serialization.from_state_dict(template, {"params": params, **train_state})


def save(manager: ocp.CheckpointManager, step: int, agent: Any, metadata: dict[str, Any]) -> None:
    """Start saving `agent` at `step` (asynchronous; `manager.wait_until_finished()` to block)."""
    save_items(manager, step, *split_agent(agent), metadata)


def save_items(manager: ocp.CheckpointManager, step: int, params: Any, train_state: dict[str, Any],
               metadata: dict[str, Any]) -> None:
    """Start saving the three items of a step directory, as `split_agent` gives the first two."""
    manager.save(
        step,
        args=ocp.args.Composite(
            params=ocp.args.StandardSave(params),
            train_state=ocp.args.StandardSave(train_state),
            metadata=ocp.args.JsonSave(metadata),
        ),
        force=True,
    )


def restore_agent(manager: ocp.CheckpointManager, step: int, template: Any) -> Any:
    """The agent saved at `step`, restored onto `template`'s structure and shardings."""
    params, train_state = split_agent(template)
    as_abstract = lambda tree: jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, tree)  # noqa: E731
    try:
        restored = manager.restore(
            step,
            args=ocp.args.Composite(
                params=ocp.args.StandardRestore(as_abstract(params)),
                train_state=ocp.args.StandardRestore(as_abstract(train_state)),
            ),
        )
    except (ValueError, KeyError, FileNotFoundError) as e:
        where = Path(manager.directory) / str(step)
        raise CheckpointError(f"{where}: cannot restore the training state ({e})") from None
    return join_agent(template, restored["params"], restored["train_state"])


def step_dirs(root: Path) -> dict[int, Path]:
    """Finished step directories under a checkpoints root, by step."""
    if not root.is_dir():
        return {}
    return {
        int(p.name): p
        for p in root.iterdir()
        if p.is_dir() and p.name.isdigit() and (p / METADATA_FILE).is_file()
    }


def resolve_step_dir(path: str | Path) -> Path:
    """A step directory from a step dir, a checkpoints root or a workdir (latest step)."""
    path = Path(path)
    if (path / METADATA_FILE).is_file():
        return path
    for root in (path, path / "checkpoints"):
        steps = step_dirs(root)
        if steps:
            return steps[max(steps)]
    if not path.exists():
        raise CheckpointError(f"{path}: no such directory")
    raise CheckpointError(
        f"{path}: no checkpoint found; expected <workdir>/checkpoints/<step>/ with {METADATA_FILE}"
    )


def read_json(path: Path, written_by: str) -> Any:
    """The JSON file at `path`, or a CheckpointError naming it: missing (not written by `written_by`)
    or not valid JSON."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing; not a checkpoint written by {written_by}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from None


def read_metadata(step_dir: Path) -> dict[str, Any]:
    """The metadata item of a step directory, checked for the schema version and the key fields."""
    path = step_dir / METADATA_FILE
    metadata = read_json(path, "mqe-train")
    if metadata.get("schema_version") != SCHEMA_VERSION:
        raise CheckpointError(
            f"{path}: schema_version {metadata.get('schema_version')!r}; this code reads {SCHEMA_VERSION}"
        )
    missing = [k for k in ("agent", "config", "step", "action_stats", "observation") if k not in metadata]
    if missing:
        raise CheckpointError(f"{path}: missing field(s) {missing}")
    return metadata


def restore_params(step_dir: Path) -> Any:
    """Only the `params` item of a step directory (no optimizer state), on this process's first
    device, whatever mesh the trainer used (so a 2-GPU run serves from one GPU)."""
    path = (step_dir / "params").absolute()
    checkpointer = ocp.StandardCheckpointer()
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    try:
        tree = checkpointer.metadata(path).item_metadata
        target = jax.tree_util.tree_map(
            lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), tree
        )
        return checkpointer.restore(path, target)
    except (ValueError, FileNotFoundError, KeyError, AttributeError) as e:
        raise CheckpointError(f"{path}: cannot read the parameters ({e})") from None
