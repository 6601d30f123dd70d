"""The paper's reference numbers and the whole-point reconstruction that matches them."""

from __future__ import annotations

import pytest

from eval_protocols.paper import PAPER_RESULTS, PAPER_TRIALS, points_matching
from eval_protocols.tasks import load_tasks


def test_every_published_cell_is_reached_with_whole_points():
    tasks = load_tasks()
    for task, by_policy in PAPER_RESULTS.items():
        max_points = tasks[task].max_points
        for progress, successes in by_policy.values():
            points = points_matching(progress, successes, max_points)
            assert len(points) == PAPER_TRIALS and points.count(max_points) == successes
            assert all(0 <= p <= max_points for p in points)
            assert round(sum(points) / (PAPER_TRIALS * max_points), 2) == progress


def test_triple_pnp_mqe_by_hand():
    # 0.56 of 45 points is 25.2: 25 points, 4 full trials (12) and 13 spread over 11 failures
    assert points_matching(0.56, 4, 3) == [3, 3, 3, 3] + [2, 2] + [1] * 9


def test_unreachable_numbers_are_refused():
    with pytest.raises(ValueError, match="cannot be reached with whole points"):
        points_matching(0.90, 1, 1)  # one success of 15 is 0.07, not 0.90
