"""Blinding and blank sheets: labels hide the policies, the key round-trips through summarize."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from eval_protocols.blank_sheet import plan_trials
from eval_protocols.blinding import blind_labels, make_key, read_key, write_key
from eval_protocols.cli import main
from eval_protocols.sheets import SheetError, read_sheet
from eval_protocols.tasks import load_tasks

POLICIES = ["mqe", "gcbc", "gciql"]


def test_labels_are_spreadsheet_style() -> None:
    assert blind_labels(3) == ["A", "B", "C"]
    assert blind_labels(28)[25:] == ["Z", "AA", "AB"]


def test_key_round_trips_and_depends_on_seed(tmp_path: Path) -> None:
    key = make_key(POLICIES, seed=11, sheet="sheet.csv")
    write_key(key, tmp_path / "key.json")
    assert read_key(tmp_path / "key.json") == key
    assert sorted(key.labels.values()) == sorted(POLICIES)
    assignments = {tuple(make_key(POLICIES, seed=s).labels.values()) for s in range(30)}
    assert len(assignments) > 1, "label A must not always be the first policy given"


@pytest.mark.parametrize(("content", "expected"), [
    ("{", "not valid JSON"),
    ('{"schema_version": 1, "labels": {}}', "'labels' must map each label"),
    ('{"labels": {"A": "mqe"}}', "not a blinding key"),
    ('{"schema_version": 1, "labels": {"A": "mqe", "B": "mqe"}}', "several labels to the same policy"),
])
def test_bad_keys_are_refused(tmp_path: Path, content: str, expected: str) -> None:
    (tmp_path / "key.json").write_text(content)
    with pytest.raises(SheetError, match=expected):
        read_key(tmp_path / "key.json")


def test_plan_runs_every_policy_once_per_round() -> None:
    tasks = [load_tasks()["single_pnp"], load_tasks()["double_pnp"]]
    plan = plan_trials(["A", "B", "C"], tasks, seed=5)
    assert len(plan) == 2 * 15 * 3 and [p.run for p in plan] == list(range(1, 91))
    assert [p.task.name for p in plan] == ["single_pnp"] * 45 + ["double_pnp"] * 45
    for start in range(0, 90, 3):  # each block of three runs is one round: A, B, C in some order
        block = plan[start:start + 3]
        assert sorted(p.policy for p in block) == ["A", "B", "C"]
        assert len({p.trial for p in block}) == 1
    orders = Counter(tuple(p.policy for p in plan[s:s + 3]) for s in range(0, 90, 3))
    assert len(orders) > 1, "the order within rounds must be shuffled"
    assert plan == plan_trials(["A", "B", "C"], tasks, seed=5)


def _score(sheet: Path, points_of: dict[str, int]) -> None:
    """Fill the blank sheet as an operator would: points per label, same for every trial."""
    with open(sheet, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["points"] = str(points_of[row["policy"]])
    with open(sheet, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def test_blind_sheet_to_report_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "session"
    assert main(["sheet", "--policies", *POLICIES, "--tasks", "double_pnp", "--trials", "4",
                 "--out", str(out), "--key", str(tmp_path / "secret/key.json"), "--date", "2025-03-14"]) == 0
    sheet = out / "sheet.csv"
    text, page = sheet.read_text(), (out / "sheet.html").read_text()
    for name in POLICIES:  # the operator's papers name no policy
        assert name not in text and name not in page
    assert "Scoring: 1 point for each object that ends at its target place." in page
    key = read_key(tmp_path / "secret/key.json")
    points_by_policy = {"mqe": 2, "gcbc": 0, "gciql": 1}
    _score(sheet, {label: points_by_policy[name] for label, name in key.labels.items()})
    assert {r.policy for r in read_sheet(sheet)} == {"A", "B", "C"}
    report = tmp_path / "report"
    assert main(["summarize", str(sheet), "--key", f"{sheet}={tmp_path / 'secret/key.json'}",
                 "--out", str(report), "--bootstrap-resamples", "200", "--permutation-resamples", "200"]) == 0
    summary = json.loads((report / "summary.json").read_text())
    assert {p: summary[p]["double_pnp"]["progress_mean"] for p in POLICIES} == {"mqe": 1.0, "gcbc": 0.0, "gciql": 0.5}
    assert summary["mqe"]["double_pnp"]["successes"] == 4 and summary["gcbc"]["double_pnp"]["trials"] == 4


def test_wrong_key_is_named(tmp_path: Path, capsys) -> None:
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("policy,task,trial,points\nD,single_pnp,1,1\n")
    write_key(make_key(POLICIES, seed=0), tmp_path / "key.json")
    assert main(["summarize", str(sheet), "--key", str(tmp_path / "key.json"), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"{sheet} line 2: policy 'D' is not a label of the blinding key" in err


def test_unblinded_sheet_names_policies(tmp_path: Path) -> None:
    assert main(["sheet", "--policies", "mqe", "gcbc", "--no-blind", "--tasks", "open_drawer",
                 "--out", str(tmp_path), "--seed", "1"]) == 0
    assert not (tmp_path / "blinding_key.json").exists()
    with open(tmp_path / "sheet.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert Counter(r["policy"] for r in rows) == {"mqe": 15, "gcbc": 15}
    assert {r["max_points"] for r in rows} == {"1"}
