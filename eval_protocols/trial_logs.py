"""Reading the robot client's per-trial logs: `steps.jsonl`, one JSON object per control step."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from pathlib import Path

logger = logging.getLogger(__name__)

STEPS_FILE = "steps.jsonl"


@dataclasses.dataclass(frozen=True)
class DistanceCurve:
    """The MQE distance to goal over one trial; NaN where the policy reported none."""

    steps: tuple[int, ...]
    distances: tuple[float, ...]


def read_distance_curve(trial_dir: Path) -> tuple[DistanceCurve | None, list[str]]:
    """The curve of `trial_dir/steps.jsonl`, or None and the reason; a truncated last line is skipped.

    A kill during a write can leave the last line cut short: it is skipped with a warning. A
    bad line elsewhere means the log is damaged: the whole curve is skipped with a warning,
    since a curve with holes in the middle would mislead.
    """
    path = trial_dir / STEPS_FILE
    if not trial_dir.is_dir():
        return None, [f"{trial_dir}: trial directory not found; no distance curve"]
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None, [f"{path}: not found; no distance curve"]
    except (OSError, UnicodeDecodeError) as e:
        return None, [f"{path}: unreadable ({e}); no distance curve"]
    warnings: list[str] = []
    steps: list[int] = []
    distances: list[float] = []
    last = max((i for i, text in enumerate(lines) if text.strip()), default=-1)
    for i, text in enumerate(lines):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
            step = record["step"]
            distance = record["distance"]
            if not isinstance(step, int) or isinstance(step, bool):
                raise ValueError(f"step {step!r} is not an integer")
            if distance is not None and (isinstance(distance, bool) or not isinstance(distance, int | float)):
                raise ValueError(f"distance {distance!r} is not a number or null")
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            if i == last:
                warnings.append(f"{path} line {i + 1}: incomplete last line skipped (interrupted write?)")
                break
            return None, [f"{path} line {i + 1}: bad record ({e}); no distance curve for this trial"]
        steps.append(step)
        distances.append(math.nan if distance is None else float(distance))
    if not steps:
        return None, [*warnings, f"{path}: no steps; no distance curve"]
    return DistanceCurve(tuple(steps), tuple(distances)), warnings
