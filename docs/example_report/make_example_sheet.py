"""Build docs/example_report/example_sheet.csv: a blinded sheet scored with the paper's results.

The points are a reconstruction, not real trials: per policy and task, the paper's success
count of 15 (DESIGN.md section 7) gets full points and the other trials get partial points
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
from eval_protocols.tasks import load_tasks

HERE = Path(__file__).resolve().parent
# task -> policy -> (progress mean, successes of 15), from the paper's BridgeData appendix.
PAPER = {
    "single_pnp": {"mqe": (0.80, 12), "gcbc": (0.33, 5), "gciql": (0.67, 10), "tra": (0.60, 9)},
    "double_pnp": {"mqe": (0.73, 10), "gcbc": (0.17, 1), "gciql": (0.47, 4), "tra": (0.63, 6)},
    "triple_pnp": {"mqe": (0.56, 4), "gcbc": (0.16, 0), "gciql": (0.24, 0), "tra": (0.38, 1)},
    "quadruple_pnp": {"mqe": (0.55, 2), "gcbc": (0.18, 0), "gciql": (0.27, 0), "tra": (0.32, 0)},
    "open_drawer": {"mqe": (0.80, 12), "gcbc": (0.67, 10), "gciql": (0.33, 5), "tra": (0.73, 11)},
    "open_drawer_place": {"mqe": (0.63, 5), "gcbc": (0.30, 0), "gciql": (0.23, 0), "tra": (0.43, 1)},
}


def points_for(progress: float, successes: int, max_points: int, trials: int, rng: random.Random) -> list[int]:
    """Whole points per trial with `successes` full scores and a mean progress rounding to `progress`."""
    partial_total = round(progress * trials * max_points) - successes * max_points
    partial = [0] * (trials - successes)
    for i in range(partial_total):
        partial[i % len(partial)] += 1
    points = [max_points] * successes + partial
    rng.shuffle(points)  # the order of outcomes within a policy does not change any statistic
    return points


def main() -> None:
    """Write the blank blinded sheet with mqe-report's own code, then score it."""
    config = SheetConfig(policies=("mqe", "gcbc", "gciql", "tra"), out=HERE, name="example_sheet",
                         key=HERE / "example_key.json", seed=2025, operator="jd", date="2025-03-14", force=True)
    run_sheet(config)
    labels = read_key(HERE / "example_key.json").labels
    tasks = load_tasks()
    rng = random.Random(0)
    points = {(label, task): points_for(*PAPER[task][policy], tasks[task].max_points, tasks[task].trials, rng)
              for label, policy in labels.items() for task in PAPER}
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
