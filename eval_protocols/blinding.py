"""Blinding: policies hidden behind labels A, B, C...; the key lives in its own JSON file.

The operator scores trials knowing only a label, so what they expect of a policy cannot
colour the score. `summarize` reads the key to turn labels back into policy names.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import random
import string
from collections.abc import Sequence
from pathlib import Path

from eval_protocols.sheets import SheetError, TrialRow

logger = logging.getLogger(__name__)

KEY_SCHEMA_VERSION = 1


def blind_labels(count: int) -> list[str]:
    """Spreadsheet-style labels: A..Z, then AA, AB, ..."""
    labels = []
    for i in range(count):
        label, n = "", i + 1
        while n:
            n, rem = divmod(n - 1, 26)
            label = string.ascii_uppercase[rem] + label
        labels.append(label)
    return labels


@dataclasses.dataclass(frozen=True)
class BlindingKey:
    """Which policy each label stands for, and how the assignment was drawn."""

    labels: dict[str, str]  # label -> policy name
    seed: int  # seed of the label assignment and trial order (for an audit, not for the operator)
    created: str  # ISO 8601 time the sheet was made
    sheet: str = ""  # file name of the sheet this key belongs to

    def __post_init__(self) -> None:
        names = list(self.labels.values())
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"blinding key maps several labels to the same policy: {repeated}")

    def unblind(self, rows: Sequence[TrialRow]) -> list[TrialRow]:
        """Rows with labels replaced by policy names; a label not in the key raises SheetError."""
        out = []
        for row in rows:
            if row.policy not in self.labels:
                raise SheetError(f"{row.where}: policy '{row.policy}' is not a label of the blinding key "
                                 f"(labels {', '.join(self.labels)}); is this the right key for this sheet?")
            out.append(dataclasses.replace(row, policy=self.labels[row.policy]))
        return out


def make_key(policies: Sequence[str], seed: int, sheet: str = "") -> BlindingKey:
    """Assign labels to policies in a random order drawn from `seed`."""
    if len(set(policies)) != len(policies):
        raise ValueError(f"policies must be distinct, got {list(policies)}")
    shuffled = list(policies)
    # Shuffle so that label A is not always the first policy typed on the command line.
    random.Random(seed).shuffle(shuffled)
    return BlindingKey(
        labels=dict(zip(blind_labels(len(shuffled)), shuffled, strict=True)),
        seed=seed,
        created=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        sheet=sheet,
    )


def write_key(key: BlindingKey, path: str | Path) -> None:
    """Write the key as JSON (kept away from the operator until scoring is done)."""
    payload = {"schema_version": KEY_SCHEMA_VERSION, "labels": key.labels, "seed": key.seed,
               "created": key.created, "sheet": key.sheet}
    Path(path).write_text(json.dumps(payload, indent=2) + "\n")


def read_key(path: str | Path) -> BlindingKey:
    """Read a key written by write_key; a malformed one raises SheetError naming the file."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise SheetError(f"{path}: blinding key not found") from None
    except json.JSONDecodeError as e:
        raise SheetError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(raw, dict) or raw.get("schema_version") != KEY_SCHEMA_VERSION:
        raise SheetError(f"{path}: not a blinding key (expected schema_version {KEY_SCHEMA_VERSION})")
    labels = raw.get("labels")
    if not isinstance(labels, dict) or not labels or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in labels.items()):
        raise SheetError(f"{path}: 'labels' must map each label to a policy name")
    try:
        return BlindingKey(labels=labels, seed=int(raw.get("seed", -1)), created=str(raw.get("created", "")),
                           sheet=str(raw.get("sheet", "")))
    except ValueError as e:
        raise SheetError(f"{path}: {e}") from None
