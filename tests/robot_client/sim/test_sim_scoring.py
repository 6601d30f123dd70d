"""Hand-placed scenes give the points an operator would give, for every task."""

import dataclasses

import numpy as np
import pytest

from eval_protocols.tasks import TaskError, load_tasks
from robot_client.sim import layout as L
from robot_client.sim import scoring

PLATE = np.array([0.3, -0.08])
DRAWER = np.array([0.38, 0.13])


def _state(on_plate=(), opening=0.0, in_drawer=None, lifted=()):
    pos = np.array([[0.15 + 0.05 * i, 0.0, o.half_height] for i, o in enumerate(L.OBJECTS)])
    for k, i in enumerate(on_plate):
        pos[i] = [*L.plate_slots(PLATE, 4)[k], L.PLATE_TOP + L.OBJECTS[i].half_height]
    for i in lifted:
        pos[i] = [*PLATE, 0.1]  # above the plate, still in the gripper
    if in_drawer is not None:
        xy = L.drawer_drop_point(DRAWER, opening)
        pos[in_drawer] = [*xy, L.DRAWER_BOTTOM + L.DRAWER_WALL + L.OBJECTS[in_drawer].half_height]
    return scoring.SceneState(pos, PLATE, DRAWER, opening, task_objects=(2, 0, 3, 1))


@pytest.mark.parametrize(
    "task, placed, expected",
    [
        ("single_pnp", (2,), 1),
        ("single_pnp", (0,), 0),  # the wrong object
        ("double_pnp", (2,), 1),
        ("double_pnp", (2, 0), 2),
        ("triple_pnp", (2, 0, 1), 2),
        ("triple_pnp", (2, 0, 3), 3),
        ("quadruple_pnp", (), 0),
        ("quadruple_pnp", (0, 1, 2, 3), 4),
    ],
)
def test_pick_and_place_points(task, placed, expected):
    assert scoring.score(task, _state(on_plate=placed)) == expected


def test_held_or_off_plate_objects_do_not_count():
    assert scoring.score("single_pnp", _state(lifted=(2,))) == 0
    s = _state(on_plate=(2,))
    moved = s.objects_pos.copy()
    moved[2, :2] = PLATE + [L.PLATE_RADIUS + 0.01, 0]
    assert scoring.score("single_pnp", dataclasses.replace(s, objects_pos=moved)) == 0


@pytest.mark.parametrize(
    "opening, expected", [(0.0, 0), (L.DRAWER_OPEN_THRESHOLD - 0.005, 0), (0.08, 1), (0.2, 0)]
)
def test_open_drawer(opening, expected):
    # 0.2 is past the stop: pulled off its base
    assert scoring.score("open_drawer", _state(opening=opening)) == expected


def test_open_drawer_place():
    assert scoring.score("open_drawer_place", _state(opening=0.09, in_drawer=2)) == 2
    assert scoring.score("open_drawer_place", _state(opening=0.09)) == 1
    assert scoring.score("open_drawer_place", _state(opening=0.09, in_drawer=0)) == 1  # wrong one
    # an object dropped inside a barely opened drawer is in it, but the opening point is missing
    assert scoring.score("open_drawer_place", _state(opening=0.05, in_drawer=2)) == 1


def test_max_points_come_from_eval_protocols(tmp_path, monkeypatch):
    tasks = load_tasks()
    for name in scoring.SCORED_TASKS:
        full = (
            _state(on_plate=(2, 0, 3, 1))
            if name in scoring.PNP_TASKS
            else _state(opening=0.09, in_drawer=2)
        )
        assert scoring.score(name, full) == tasks[name].max_points
    with pytest.raises(TaskError, match="unknown task"):
        scoring.score("no_such_task", _state())
    # a lab's own task is known to eval_protocols, but the twin cannot score it: say so
    extra = tmp_path / "lab.toml"
    extra.write_text(
        '[stack_cups]\nmax_points = 2\ndescription = "Stack."\nscoring = "2 if stacked."\n'
    )
    monkeypatch.setenv("MQE_TASKS", str(extra))
    with pytest.raises(TaskError, match="no simulation scorer for task 'stack_cups'"):
        scoring.score("stack_cups", _state())
