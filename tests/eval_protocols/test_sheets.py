"""Scoring sheets: every validation case, and appends that survive crashes and concurrency."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from eval_sheet_helpers import write_csv

from eval_protocols.sheets import COLUMNS, SheetError, TrialRow, append_row, read_sheet

ROW = {"policy": "mqe", "task": "single_pnp", "trial": 1, "points": 1}


def test_append_writes_header_once_and_rows_read_back(tmp_path: Path) -> None:
    sheet = tmp_path / "runs" / "sheet.csv"
    append_row(sheet, ROW)
    append_row(sheet, TrialRow(policy="mqe", task="double_pnp", trial=1, points=1, max_points=2,
                               operator="jd", date="2025-03-14", trial_dir="trials/0001"))
    lines = sheet.read_text().splitlines()
    assert lines[0] == ",".join(COLUMNS)
    assert len(lines) == 3
    rows = read_sheet(sheet)
    assert [(r.task, r.points, r.success) for r in rows] == [("single_pnp", 1, True), ("double_pnp", 1, False)]
    assert rows[1].progress == 0.5
    assert rows[1].line == 3
    assert rows[1].resolved_trial_dir() == sheet.parent / "trials/0001"


def test_append_refuses_bad_row_and_leaves_sheet_unchanged(tmp_path: Path) -> None:
    sheet = tmp_path / "sheet.csv"
    append_row(sheet, ROW)
    before = sheet.read_bytes()
    with pytest.raises(SheetError, match="points 3 > max 1 for task single_pnp"):
        append_row(sheet, {**ROW, "trial": 2, "points": 3})
    with pytest.raises(SheetError, match=r"duplicate trial \(policy mqe, task single_pnp, trial 1\)"):
        append_row(sheet, ROW)
    assert sheet.read_bytes() == before


def test_append_after_torn_line_keeps_new_row_whole(tmp_path: Path) -> None:
    sheet = tmp_path / "sheet.csv"
    append_row(sheet, ROW)
    with open(sheet, "a") as f:
        f.write("mqe,single_pnp,2,")  # what a kill in the middle of a write could leave
    append_row(sheet, {**ROW, "trial": 3})
    lines = sheet.read_text().splitlines()
    assert lines[2] == "mqe,single_pnp,2,"
    assert lines[3].startswith("mqe,single_pnp,3,1,1,true")
    # The torn line is reported, not dropped.
    with pytest.raises(SheetError, match=r"sheet.csv line 3: 4 fields, the header has 11"):
        read_sheet(sheet)


def _append_many(sheet: Path, policy: str) -> None:
    for trial in range(1, 16):
        append_row(sheet, {"policy": policy, "task": "double_pnp", "trial": trial, "points": trial % 3})


def test_concurrent_appends_lose_and_mangle_nothing(tmp_path: Path) -> None:
    sheet = tmp_path / "sheet.csv"
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_append_many, args=(sheet, f"p{i}")) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
        assert w.exitcode == 0
    rows = read_sheet(sheet)
    assert len(rows) == 60
    assert sheet.read_text().count("policy,task") == 1  # one header, written by exactly one process


def _check_error(tmp_path: Path, records: list[dict], expected: str, header=COLUMNS) -> None:
    sheet = write_csv(tmp_path / "sheet.csv", records, header)
    with pytest.raises(SheetError) as info:
        read_sheet(sheet)
    assert str(info.value).startswith(str(sheet)), "the error must name the file"
    assert expected in str(info.value)


def test_unknown_task_is_named_with_line_and_suggestion(tmp_path: Path) -> None:
    _check_error(tmp_path, [ROW, {**ROW, "task": "single_pnpp", "trial": 2}],
                 "line 3: unknown task 'single_pnpp' (did you mean 'single_pnp'?)")


@pytest.mark.parametrize(("points", "expected"), [
    (3, "line 3: points 3 > max 1 for task single_pnp"),
    (-1, "line 3: points -1 < 0 for task single_pnp"),
    ("0.5", "line 3: points '0.5' is not a whole number"),
    ("one", "line 3: points 'one' is not a whole number"),
])
def test_points_outside_range_are_refused(tmp_path: Path, points: object, expected: str) -> None:
    _check_error(tmp_path, [ROW, {**ROW, "trial": 2, "points": points}], expected)


def test_duplicate_trial_names_both_lines(tmp_path: Path) -> None:
    _check_error(tmp_path, [ROW, {**ROW, "trial": 2}, {**ROW, "points": 0}],
                 "line 4: duplicate trial (policy mqe, task single_pnp, trial 1); first at")
    sheet = tmp_path / "sheet.csv"
    with pytest.raises(SheetError, match=f"first at {sheet} line 2"):
        read_sheet(sheet)


@pytest.mark.parametrize(("record", "expected"), [
    ({**ROW, "points": ""}, "line 2: missing points: score the trial"),
    ({**ROW, "policy": " "}, "line 2: missing policy"),
    ({**ROW, "trial": ""}, "line 2: missing trial"),
    ({**ROW, "trial": 0}, "line 2: trial 0 must be >= 1"),
    ({**ROW, "max_points": 2}, "line 2: max_points 2 disagrees with task single_pnp"),
    ({**ROW, "points": 0, "success": "true"}, "line 2: success 'true' disagrees with points 0"),
    ({**ROW, "success": "maybe"}, "line 2: success 'maybe' must be true/false"),
    ({**ROW, "date": "14/03/2025"}, "line 2: date '14/03/2025' is not ISO 8601"),
])
def test_bad_fields_are_named(tmp_path: Path, record: dict, expected: str) -> None:
    _check_error(tmp_path, [record], expected)


def test_row_with_missing_cells_is_refused(tmp_path: Path) -> None:
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("policy,task,trial,points\nmqe,single_pnp,1,1\nmqe,single_pnp,2\n")
    with pytest.raises(SheetError, match=r"sheet.csv line 3: 3 fields, the header has 4"):
        read_sheet(sheet)


@pytest.mark.parametrize(("header", "expected"), [
    (("policy", "task", "trial", "point"), "line 1: unknown column 'point' (did you mean 'points'?)"),
    (("policy", "task", "trial"), "line 1: header lacks required column(s) ['points']"),
    (("policy", "task", "trial", "points", "points"), "line 1: column(s) ['points'] appear more than once"),
])
def test_bad_header_is_refused(tmp_path: Path, header: tuple[str, ...], expected: str) -> None:
    _check_error(tmp_path, [], expected, header=header)


def test_minimal_header_byte_order_mark_and_blank_lines_are_accepted(tmp_path: Path) -> None:
    sheet = tmp_path / "sheet.csv"
    # As a spreadsheet saves it: a BOM, CRLF line ends, spaces around cells, a blank line, "1.0".
    sheet.write_bytes("\ufeffpolicy,task,trial,points\r\nmqe , double_pnp,1, 2\r\n\r\ngcbc,double_pnp,1.0,0\r\n"
                      .encode())
    rows = read_sheet(sheet)
    assert [(r.policy, r.trial, r.points, r.max_points, r.line) for r in rows] == [
        ("mqe", 1, 2, 2, 2), ("gcbc", 1, 0, 2, 4)]


def test_empty_and_missing_files_are_named(tmp_path: Path) -> None:
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(SheetError, match="empty.csv: empty file"):
        read_sheet(tmp_path / "empty.csv")
    with pytest.raises(SheetError, match="nope.csv: sheet not found"):
        read_sheet(tmp_path / "nope.csv")
