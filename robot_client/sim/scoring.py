"""Automatic scorers of the paper's six tasks from object and drawer positions.

Numpy only: a scorer reads a `SceneState`, which the twin fills from its simulation state and a
test can write by hand. Task names and max points come from `eval_protocols.tasks`.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from eval_protocols.tasks import Task, TaskError, get_task
from robot_client.sim import layout as L

logger = logging.getLogger(__name__)

PNP_TASKS = ("single_pnp", "double_pnp", "triple_pnp", "quadruple_pnp")
DRAWER_TASKS = ("open_drawer", "open_drawer_place")
SCORED_TASKS = PNP_TASKS + DRAWER_TASKS


@dataclasses.dataclass(frozen=True)
class SceneState:
    """What the scorers look at: positions in the base frame, and the task instance's objects."""

    objects_pos: np.ndarray  # (4, 3) object centres, in layout.OBJECTS order
    plate_xy: np.ndarray  # (2,) plate centre
    drawer_xy: np.ndarray  # (2,) drawer housing centre
    drawer_opening: float  # m, slide joint position (0 closed)
    task_objects: tuple[int, ...]  # indices into OBJECTS that the task instance uses, in order


def on_plate(state: SceneState, index: int) -> bool:
    """Whether object `index` rests on the plate: centre over the plate, sitting on its top."""
    spec = L.OBJECTS[index]
    pos = state.objects_pos[index]
    inside = np.linalg.norm(pos[:2] - state.plate_xy) <= L.PLATE_RADIUS
    # resting, not held above it: the centre is no higher than the object's largest half extent
    # (it may lie on its side) plus a little for contact penetration and tilt
    top = L.PLATE_TOP + max(spec.half_width, spec.half_height) + 0.006
    return bool(inside and L.PLATE_TOP < pos[2] <= top)


def drawer_open(state: SceneState) -> bool:
    """Whether the drawer is open far enough to take an object and still on its base."""
    return bool(
        L.DRAWER_OPEN_THRESHOLD
        <= state.drawer_opening
        <= L.DRAWER_RANGE[1] + L.DRAWER_STOP_TOLERANCE
    )


def in_drawer(state: SceneState, index: int) -> bool:
    """Whether object `index`'s centre lies inside the drawer box, above its floor."""
    low, high = L.drawer_interior(state.drawer_xy, state.drawer_opening)
    pos = state.objects_pos[index]
    # an object lying on the floor has its centre at least ~1 cm above it; lower means it is on
    # the table under the drawer's footprint, not in it
    above_floor = pos[2] >= low[2] + 0.005
    return bool(
        np.all(pos[:2] >= low[:2])
        and np.all(pos[:2] <= high[:2])
        and above_floor
        and pos[2] <= high[2]
    )


def _pnp_count(task: Task) -> int:
    return task.max_points  # one point per object: the task's max points is its object count


def score(task_name: str, state: SceneState) -> int:
    """Points the scene earns for `task_name`, as an operator would score it (0..max_points)."""
    return score_task(get_task(task_name), state)


def score_task(task: Task, state: SceneState) -> int:
    """`score` for an already loaded task (the twin scores every step; reading TOML each time costs)."""
    task_name = task.name
    if task_name in PNP_TASKS:
        objects = state.task_objects[: _pnp_count(task)]
        if len(objects) < _pnp_count(task):
            raise ValueError(
                f"task {task_name} needs {_pnp_count(task)} objects but the state names {len(objects)}"
            )
        points = sum(on_plate(state, i) for i in objects)
    elif task_name == "open_drawer":
        points = int(drawer_open(state))
    elif task_name == "open_drawer_place":
        points = int(drawer_open(state))
        points += int(bool(state.task_objects) and in_drawer(state, state.task_objects[0]))
    else:
        raise TaskError(
            f"no simulation scorer for task '{task_name}'; the twin scores {', '.join(SCORED_TASKS)}"
        )
    return min(int(points), task.max_points)


def task_object_count(task_name: str) -> int:
    """How many objects a task instance uses (pick-and-place: max points; drawer and place: 1)."""
    if task_name in PNP_TASKS:
        return _pnp_count(get_task(task_name))
    if task_name in DRAWER_TASKS:
        return int(task_name == "open_drawer_place")
    raise TaskError(
        f"no simulation scorer for task '{task_name}'; the twin scores {', '.join(SCORED_TASKS)}"
    )
