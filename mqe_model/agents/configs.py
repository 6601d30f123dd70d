"""Agent configs as checkpoints store them (JSON) and as the command line changes them (`--set`)."""

from __future__ import annotations

import dataclasses
import difflib
import typing
from typing import Any

from mqe_model.agents import ANY_VALUE, registry


def config_to_json(config: Any) -> dict[str, Any]:
    """An agent config as a JSON-ready dict (tuples become lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()}


def config_from_json(name: str, data: dict[str, Any]) -> Any:
    """Inverse of `config_to_json`: the frozen dataclass back, sequences as tuples.

    A field the agent no longer has (its `REMOVED_FIELDS`) is dropped where it holds the value whose
    behaviour the agent kept; with another value the config is refused: that is another agent."""
    agent = registry.get(name)
    fields = {f.name for f in dataclasses.fields(agent.Config)}
    kept = {}
    for key, value in data.items():
        if key in fields:
            kept[key] = tuple(value) if isinstance(value, list) else value
            continue
        if key not in agent.REMOVED_FIELDS:
            raise ValueError(f"{name} config has unknown field {key!r}")
        wanted = agent.REMOVED_FIELDS[key]
        if wanted is not ANY_VALUE and value != wanted:
            raise ValueError(f"{name} config has {key}={value!r}, a variant this agent no longer implements "
                             f"(only {key}={wanted!r} remains); retrain with the current defaults")
    return agent.Config(**kept)


def _parse_value(text: str, annotation: Any) -> Any:
    """`text` as the type of a config field (int, float, bool, str, None, tuple of ints)."""
    kind = str(annotation)
    if text.lower() in ("none", "null") and "None" in kind:
        return None
    if "Sequence" in kind or "tuple" in kind:
        return tuple(int(v) for v in text.replace("(", "").replace(")", "").split(",") if v.strip())
    if "bool" in kind:
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"expected true or false, got {text!r}")
        return text.lower() in ("true", "1")
    if "float" in kind:
        return float(text)
    if "int" in kind:
        return int(text)
    return text


def apply_overrides(config: Any, overrides: tuple[str, ...]) -> Any:
    """`config` with `key=value` overrides applied; unknown keys raise with the closest names."""
    hints = typing.get_type_hints(type(config))
    changes = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise ValueError(f"--set {item!r}: expected key=value, e.g. --set alpha=0.03")
        if key not in hints:
            close = difflib.get_close_matches(key, hints, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; fields: {sorted(hints)}"
            raise ValueError(f"--set {key}: {type(config).__module__}.Config has no field {key!r}{hint}")
        try:
            changes[key] = _parse_value(value.strip(), hints[key])
        except ValueError as e:
            raise ValueError(f"--set {key}={value}: {e}") from None
    return dataclasses.replace(config, **changes)
