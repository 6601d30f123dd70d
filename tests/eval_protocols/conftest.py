"""Fixtures for eval_protocols tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_sheet_helpers import write_csv

from eval_protocols.paper import PAPER_RESULTS, points_matching
from eval_protocols.tasks import load_tasks


@pytest.fixture
def paper_sheet(tmp_path: Path) -> Path:
    """A scored sheet reproducing the paper's per-task successes and progress, 15 trials each."""
    tasks = load_tasks()
    records = []
    for task, by_policy in PAPER_RESULTS.items():
        for policy, (progress, successes) in by_policy.items():
            for trial, points in enumerate(points_matching(progress, successes, tasks[task].max_points), 1):
                records.append({"policy": policy, "task": task, "trial": trial, "points": points,
                                "operator": "jd", "date": "2025-03-14"})
    return write_csv(tmp_path / "paper.csv", records)
