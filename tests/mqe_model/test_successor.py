import json
import sys

import numpy as np
import pytest

from mqe_model.toy import successor
from mqe_model.toy.lights_out import LightsOut
from mqe_model.toy.successor import SuccessorConfig, greedy_presses, successor_shape


@pytest.mark.parametrize("side", [3, 4])
@pytest.mark.parametrize("gamma", [0.95, 0.995])
def test_the_successor_distances_greedy_press_is_always_a_shortest_path_press(side, gamma):
    """The random-press data's own successor distance (MQE's backup target without the invariance) orders
    every pattern's 16 (or 9) next patterns so that its nearest is one press closer to the goal."""
    shape = successor_shape(LightsOut(side), gamma)
    assert shape.greedy_shortest == 1.0
    nats = list(shape.nats_by_presses.values())
    assert list(shape.nats_by_presses) == list(range(1, len(nats) + 1)) and (np.diff(nats) > 0).all()


def test_far_goals_flatten_as_the_discount_nears_one():
    """In the backup's units the far press counts draw together as gamma -> 1: at OGBench's 0.995 the
    4x4 distance grows by about 2 % from 3 to 7 presses, at the toy's 0.95 by about 10 %."""
    board = LightsOut(4)
    shapes = [successor_shape(board, gamma) for gamma in (0.5, 0.8, 0.95, 0.995)]
    spreads = [shape.far_spread for shape in shapes]
    assert (np.diff(spreads) < 0).all()
    assert 0.09 < spreads[2] < 0.11 and 0.015 < spreads[3] < 0.025
    assert shapes[3].nats_by_presses[7] - shapes[3].nats_by_presses[4] < 0.05


def test_greedy_presses_follow_the_table_they_are_given():
    board = LightsOut(3)
    patterns = board.reachable[board.reachable != 0]
    # The press table itself is a perfect guide; a constant one always presses button 0.
    shortest = board.presses[patterns ^ board.masks[greedy_presses(board, board.presses, patterns)]]
    assert (shortest == board.presses[patterns] - 1).all()
    assert (greedy_presses(board, np.zeros(512), patterns) == 0).all()


def test_the_cli_prints_each_discount_and_refuses_bad_ones(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["successor", "--side", "3", "--gammas", "0.9"])
    successor.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("3x3 gamma 0.9: Spearman") and "shortest path from 1.000" in lines[0]
    assert [shape["gamma"] for shape in json.loads(lines[-1])] == [0.9]
    for bad in ({"gammas": (1.0,)}, {"gammas": ()}, {"side": 5}):
        with pytest.raises(ValueError):
            SuccessorConfig(**bad)
