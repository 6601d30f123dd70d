"""Build docs/example_report/example_sheet.csv: a blinded sheet scored with the paper's results.

The points are a reconstruction, not real trials: per policy and task, the paper's success
count of 15 gets full points and the other trials get partial points
so that the mean progress rounds to the paper's two decimals. Run from the repository root:

    python docs/example_report/make_example_sheet.py
    mqe-report summarize docs/example_report/example_sheet.csv \
        --key docs/example_report/example_key.json --out docs/example_report
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from eval_protocols.blinding import read_key
from eval_protocols.cli import SheetConfig, run_sheet
from eval_protocols.paper import PAPER_RESULTS, points_matching
from eval_protocols.tasks import load_tasks

HERE = Path(__file__).resolve().parent


def main() -> None:
    """Write the blank blinded sheet with mqe-report's own code, then score it."""
    config = SheetConfig(policies=("mqe", "gcbc", "gciql", "tra"), out=HERE, name="example_sheet",
                         key=HERE / "example_key.json", seed=2025, operator="jd", date="2025-03-14", force=True)
    run_sheet(config)
    labels = read_key(HERE / "example_key.json").labels
    tasks = load_tasks()
    rng = random.Random(0)
    points = {}
    for label, policy in labels.items():
        for task in PAPER_RESULTS:
            trial_points = points_matching(*PAPER_RESULTS[task][policy], tasks[task].max_points, tasks[task].trials)
            rng.shuffle(trial_points)  # the order of outcomes within a policy does not change any statistic
            points[label, task] = trial_points
    sheet = HERE / "example_sheet.csv"
    with open(sheet, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["points"] = str(points[row["policy"], row["task"]][int(row["trial"]) - 1])
    with open(sheet, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
