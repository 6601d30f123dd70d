"""Helpers for eval_protocols tests: the paper's results, per-trial points matching them, a CSV writer.

A uniquely named module (not conftest) so that test files import it unambiguously.
"""

from __future__ import annotations

import csv
from pathlib import Path

from eval_protocols.sheets import COLUMNS

TRIALS = 15
# DESIGN.md section 7 (paper, BridgeData appendix): task -> policy -> (progress mean, successes of 15).
PAPER_RESULTS = {
    "single_pnp": {"mqe": (0.80, 12), "gcbc": (0.33, 5), "gciql": (0.67, 10), "tra": (0.60, 9)},
    "double_pnp": {"mqe": (0.73, 10), "gcbc": (0.17, 1), "gciql": (0.47, 4), "tra": (0.63, 6)},
    "triple_pnp": {"mqe": (0.56, 4), "gcbc": (0.16, 0), "gciql": (0.24, 0), "tra": (0.38, 1)},
    "quadruple_pnp": {"mqe": (0.55, 2), "gcbc": (0.18, 0), "gciql": (0.27, 0), "tra": (0.32, 0)},
    "open_drawer": {"mqe": (0.80, 12), "gcbc": (0.67, 10), "gciql": (0.33, 5), "tra": (0.73, 11)},
    "open_drawer_place": {"mqe": (0.63, 5), "gcbc": (0.30, 0), "gciql": (0.23, 0), "tra": (0.43, 1)},
}


def paper_points(progress: float, successes: int, max_points: int, trials: int = TRIALS) -> list[int]:
    """Per-trial points with exactly `successes` full-point trials and mean progress rounding to `progress`.

    The paper reports means to two decimals; with 15 trials the total points are integers, so
    e.g. Triple PnP MQE 0.56 is matched by 25/45 = 0.5556 (exactly 0.56 is impossible).
    """
    total = round(progress * trials * max_points)
    partial_total = total - successes * max_points
    failures = trials - successes
    assert 0 <= partial_total <= failures * (max_points - 1), "paper numbers not reachable with whole points"
    assert round(total / (trials * max_points), 2) == progress
    partial = [0] * failures
    for i in range(partial_total):  # spread the partial points round robin, each below max
        partial[i % failures] += 1
    return [max_points] * successes + partial


def write_csv(path: Path, records: list[dict[str, object]], header: list[str] | tuple[str, ...] = COLUMNS) -> Path:
    """Write records as a CSV sheet with the given header (cells not in a record left empty)."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(header), lineterminator="\n")
        writer.writeheader()
        for r in records:
            writer.writerow({k: r.get(k, "") for k in header})
    return path
