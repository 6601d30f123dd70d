"""Helpers for eval_protocols tests: a CSV writer for sheets.

A uniquely named module (not conftest) so that test files import it unambiguously.
"""

from __future__ import annotations

import csv
from pathlib import Path

from eval_protocols.sheets import COLUMNS


def write_csv(path: Path, records: list[dict[str, object]], header: list[str] | tuple[str, ...] = COLUMNS) -> Path:
    """Write records as a CSV sheet with the given header (cells not in a record left empty)."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(header), lineterminator="\n")
        writer.writeheader()
        for r in records:
            writer.writerow({k: r.get(k, "") for k in header})
    return path
