"""Evaluation task definitions, read from TOML so that a lab adds tasks without code changes."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # the robot client on the Pythons of ROS Noetic and Humble
    import tomli as tomllib

BUILTIN_TASKS = Path(__file__).with_name("tasks.toml")
TASKS_ENV = "MQE_TASKS"  # colon-separated extra TOML files with more task tables


class TaskError(ValueError):
    """A task file is malformed or a task name is unknown; the message says which and how to fix it."""


@dataclasses.dataclass(frozen=True)
class Task:
    """One evaluation task: how many points a trial can earn and how the operator scores it."""

    name: str  # identifier used in sheets and on the command line, e.g. "double_pnp"
    title: str  # human-readable name for tables, e.g. "Double PnP"
    max_points: int  # points for a fully successful trial; success means points == max_points
    trials: int  # trials per policy the protocol asks for
    description: str  # what the robot must do, one line
    scoring: str  # the operator's scoring rule, in plain words

    def is_success(self, points: float) -> bool:
        """Binary success: the trial earned full points."""
        return points >= self.max_points

    def progress(self, points: float) -> float:
        """Task progress of one trial: points / max points."""
        return points / self.max_points


def _parse(path: Path) -> dict[str, Task]:
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise TaskError(f"{path}: task file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{path}: not valid TOML ({e})") from None
    tasks = {}
    for name, table in raw.items():
        if not isinstance(table, dict):
            raise TaskError(f"{path}: '{name}' must be a table ([{name}]) of task fields")
        unknown = set(table) - {"title", "max_points", "trials", "description", "scoring"}
        if unknown:
            raise TaskError(f"{path}: task '{name}' has unknown field(s) {sorted(unknown)}")
        max_points = table.get("max_points")
        if not isinstance(max_points, int) or isinstance(max_points, bool) or max_points < 1:
            raise TaskError(f"{path}: task '{name}': max_points must be an integer >= 1, got {max_points!r}")
        trials = table.get("trials", 15)
        if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
            raise TaskError(f"{path}: task '{name}': trials must be an integer >= 1, got {trials!r}")
        for field in ("description", "scoring"):
            if not isinstance(table.get(field), str) or not table[field].strip():
                raise TaskError(f"{path}: task '{name}': '{field}' must be a non-empty string")
        tasks[name] = Task(
            name=name,
            title=str(table.get("title", name)),
            max_points=max_points,
            trials=trials,
            description=table["description"],
            scoring=table["scoring"],
        )
    return tasks


def load_tasks(extra_files: list[str | Path] | None = None) -> dict[str, Task]:
    """All tasks: the built-in ones, then those of `extra_files` and of $MQE_TASKS (later wins)."""
    files = [BUILTIN_TASKS, *(Path(p) for p in extra_files or [])]
    files += [Path(p) for p in os.environ.get(TASKS_ENV, "").split(":") if p]
    tasks: dict[str, Task] = {}
    for f in files:
        tasks.update(_parse(f))
    return tasks


def get_task(name: str, extra_files: list[str | Path] | None = None) -> Task:
    """The task called `name`, or a TaskError listing the known names."""
    tasks = load_tasks(extra_files)
    if name not in tasks:
        raise TaskError(f"unknown task '{name}'; known tasks: {', '.join(sorted(tasks))}")
    return tasks[name]
