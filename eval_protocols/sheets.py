"""Scoring sheets: the CSV schema, validated reading, and crash-safe appends (stdlib only).

The robot client imports this module to append one row per trial, so it must stay light:
no numpy, scipy or matplotlib here. The schema is documented in docs/scoring_sheet.md.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import difflib
import io
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from eval_protocols.tasks import Task, load_tasks

logger = logging.getLogger(__name__)

REQUIRED_COLUMNS = ("policy", "task", "trial", "points")
OPTIONAL_COLUMNS = (
    "max_points",  # copied from the task definition; must agree with it when filled
    "success",  # derived from points (full points); must agree with points when filled
    "operator",  # who scored the trial
    "date",  # ISO 8601 date or date-time of the trial
    "policy_fingerprint",  # sha256 the server reports for the policy (GET /v1/metadata)
    "notes",  # free text: anything unusual about the trial
    "trial_dir",  # the robot client's trial directory (relative to the sheet's folder, or absolute)
)
COLUMNS = REQUIRED_COLUMNS + OPTIONAL_COLUMNS

_TRUE = {"1", "true", "yes", "y"}
_FALSE = {"0", "false", "no", "n"}


class SheetError(ValueError):
    """A scoring sheet is malformed; the message names the file, the line and the fix."""


@dataclasses.dataclass(frozen=True)
class TrialRow:
    """One scored trial: a validated row of a scoring sheet."""

    policy: str  # policy name, or its blinding label (A, B, ...) before unblinding
    task: str  # task name, a key of load_tasks()
    trial: int  # trial number within (policy, task), from 1
    points: int  # points earned, 0..max_points
    max_points: int  # the task's maximum points
    operator: str = ""
    date: str = ""
    policy_fingerprint: str = ""
    notes: str = ""
    trial_dir: str = ""
    # Where the row came from, for error messages and for resolving relative trial_dir.
    source: Path | None = dataclasses.field(default=None, compare=False)
    line: int | None = dataclasses.field(default=None, compare=False)

    @property
    def success(self) -> bool:
        """Binary success: the trial earned full points."""
        return self.points >= self.max_points

    @property
    def progress(self) -> float:
        """Task progress of this trial: points / max points."""
        return self.points / self.max_points

    @property
    def where(self) -> str:
        """'sheet.csv line 3' when the row came from a file, else 'row'."""
        if self.source is None:
            return "row"
        return f"{self.source} line {self.line}" if self.line is not None else str(self.source)

    def resolved_trial_dir(self) -> Path | None:
        """The trial directory as a path, relative ones taken from the sheet's folder."""
        if not self.trial_dir:
            return None
        path = Path(self.trial_dir).expanduser()
        if not path.is_absolute() and self.source is not None:
            path = self.source.parent / path
        return path

    def to_record(self) -> dict[str, str]:
        """The row as CSV cells, one per column of COLUMNS."""
        return {
            "policy": self.policy,
            "task": self.task,
            "trial": str(self.trial),
            "points": str(self.points),
            "max_points": str(self.max_points),
            "success": "true" if self.success else "false",
            "operator": self.operator,
            "date": self.date,
            "policy_fingerprint": self.policy_fingerprint,
            "notes": self.notes,
            "trial_dir": self.trial_dir,
        }


def _parse_int(value: str, field: str, where: str) -> int:
    try:
        return int(value)
    except ValueError:
        pass
    try:
        as_float = float(value)
    except ValueError:
        raise SheetError(f"{where}: {field} '{value}' is not a whole number") from None
    if as_float.is_integer():  # "3.0", as spreadsheets sometimes write integers
        return int(as_float)
    raise SheetError(f"{where}: {field} '{value}' is not a whole number")


def parse_row(record: Mapping[str, object], tasks: Mapping[str, Task], where: str = "row",
              source: Path | None = None, line: int | None = None) -> TrialRow:
    """Validate one sheet record (column -> cell) and return it as a TrialRow."""
    cells = {k: "" if v is None else str(v).strip() for k, v in record.items()}
    unknown = set(cells) - set(COLUMNS)
    if unknown:
        raise SheetError(f"{where}: unknown field(s) {sorted(unknown)}; the columns are {', '.join(COLUMNS)}")
    missing = [c for c in REQUIRED_COLUMNS if not cells.get(c)]
    if missing:
        fix = "fill it in" if missing != ["points"] else (
            "score the trial (points 0..max), or delete the row if the trial was not run")
        raise SheetError(f"{where}: missing {', '.join(missing)}: {fix}")
    task_name = cells["task"]
    if task_name not in tasks:
        close = difflib.get_close_matches(task_name, list(tasks), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise SheetError(f"{where}: unknown task '{task_name}'{hint}; known tasks: {', '.join(tasks)}")
    task = tasks[task_name]
    trial = _parse_int(cells["trial"], "trial", where)
    if trial < 1:
        raise SheetError(f"{where}: trial {trial} must be >= 1")
    points = _parse_int(cells["points"], "points", where)
    if points < 0:
        raise SheetError(f"{where}: points {points} < 0 for task {task_name}")
    if points > task.max_points:
        raise SheetError(f"{where}: points {points} > max {task.max_points} for task {task_name}")
    if cells.get("max_points"):
        max_points = _parse_int(cells["max_points"], "max_points", where)
        if max_points != task.max_points:
            raise SheetError(f"{where}: max_points {max_points} disagrees with task {task_name} "
                             f"(max {task.max_points}); fix the sheet or the task definition")
    success_cell = cells.get("success", "").lower()
    if success_cell:
        if success_cell not in _TRUE | _FALSE:
            raise SheetError(f"{where}: success '{cells['success']}' must be true/false (or empty)")
        if (success_cell in _TRUE) != task.is_success(points):
            raise SheetError(f"{where}: success '{cells['success']}' disagrees with points {points} of "
                             f"max {task.max_points} (success means full points); leave it empty to derive it")
    date = cells.get("date", "")
    if date:
        try:
            datetime.datetime.fromisoformat(date)
        except ValueError:
            raise SheetError(f"{where}: date '{date}' is not ISO 8601 (e.g. 2025-03-14 or 2025-03-14T10:32)") from None
    return TrialRow(
        policy=cells["policy"], task=task_name, trial=trial, points=points, max_points=task.max_points,
        operator=cells.get("operator", ""), date=date,
        policy_fingerprint=cells.get("policy_fingerprint", ""), notes=cells.get("notes", ""),
        trial_dir=cells.get("trial_dir", ""), source=source, line=line,
    )


def check_header(header: list[str], where: str) -> None:
    """Raise SheetError if the header lacks a required column, repeats one, or has an unknown one."""
    names = [h.strip() for h in header]
    for name in names:
        if name not in COLUMNS:
            close = difflib.get_close_matches(name, COLUMNS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise SheetError(f"{where}: unknown column '{name}'{hint}; the columns are {', '.join(COLUMNS)}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SheetError(f"{where}: column(s) {repeated} appear more than once")
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise SheetError(f"{where}: header lacks required column(s) {missing}; it needs at least "
                         f"{','.join(REQUIRED_COLUMNS)}")


def check_duplicates(rows: Iterable[TrialRow]) -> None:
    """Raise SheetError naming both places if a (policy, task, trial) appears twice."""
    seen: dict[tuple[str, str, int], TrialRow] = {}
    for row in rows:
        key = (row.policy, row.task, row.trial)
        if key in seen:
            raise SheetError(f"{row.where}: duplicate trial (policy {row.policy}, task {row.task}, "
                             f"trial {row.trial}); first at {seen[key].where}")
        seen[key] = row


def read_sheet(path: str | Path, tasks: Mapping[str, Task] | None = None) -> list[TrialRow]:
    """Read and validate a scoring sheet; any bad row raises SheetError naming file and line."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SheetError(f"{path}: sheet not found") from None
    return _parse_sheet(data, path, load_tasks() if tasks is None else tasks)[1]


def _parse_sheet(data: bytes, path: Path, tasks: Mapping[str, Task]) -> tuple[list[str], list[TrialRow]]:
    try:
        # utf-8-sig: spreadsheets often save a byte-order mark that would corrupt the first column name.
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SheetError(f"{path}: not UTF-8 text ({e.reason}); save the sheet as CSV UTF-8") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise SheetError(f"{path}: empty file; a sheet starts with the header {','.join(COLUMNS)}") from None
    except csv.Error as e:
        raise SheetError(f"{path} line 1: not valid CSV ({e})") from None
    check_header(header, f"{path} line 1")
    header = [h.strip() for h in header]
    rows = []
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            raise SheetError(f"{path} line {reader.line_num}: not valid CSV ({e})") from None
        line = reader.line_num
        where = f"{path} line {line}"
        if not any(c.strip() for c in cells):
            continue  # a blank line carries no trial
        if len(cells) != len(header):
            raise SheetError(f"{where}: {len(cells)} fields, the header has {len(header)}; "
                             "a truncated or mis-quoted line? Fix or delete it")
        rows.append(parse_row(dict(zip(header, cells)), tasks, where, source=path, line=line))
    check_duplicates(rows)
    return header, rows


def format_rows(rows: Iterable[Mapping[str, str]], header: Iterable[str] = COLUMNS, *,
                with_header: bool = True) -> str:
    """CSV text for records (column -> cell) in the given column order."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(header), lineterminator="\n", extrasaction="raise")
    if with_header:
        writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def append_row(sheet_path: str | Path, row: TrialRow | Mapping[str, object],
               tasks: Mapping[str, Task] | None = None) -> TrialRow:
    """Validate `row` and append it to the sheet as one line, under a file lock, with fsync.

    Writes the header first if the file is new or empty. Refuses a duplicate (policy, task,
    trial). A kill at any point leaves every earlier line intact and readable.
    """
    import fcntl  # POSIX only; imported here so that reading sheets also works on Windows

    path = Path(sheet_path)
    tasks = load_tasks() if tasks is None else tasks
    record = row.to_record() if isinstance(row, TrialRow) else dict(row)
    new_row = parse_row(record, tasks, where=f"{path} (row to append)")
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # concurrent writers (two clients, an editor) queue here
        size = os.fstat(fd).st_size
        chunks = []
        if size == 0:
            header = list(COLUMNS)
            chunks.append(format_rows([], header))
        else:
            data = _read_all(fd, size)
            complete = data[: data.rfind(b"\n") + 1]
            if len(complete) < len(data):
                # An earlier write was cut short (a kill mid-write): end that line so the new row
                # stands alone; read_sheet will name the torn line rather than merge it with this one.
                logger.warning("%s: last line is incomplete (interrupted write?); starting a new line", path)
                chunks.append("\n")
            # Validate what is there (all complete lines) before adding to it.
            header, existing = _parse_sheet(complete, path, tasks)
            check_duplicates([*existing, new_row])
            lost = [c for c, v in new_row.to_record().items() if v and c not in header]
            if lost:
                raise SheetError(f"{path}: the sheet has no column(s) {lost} for the row's values; add them to the header")
        record = {c: v for c, v in new_row.to_record().items() if c in header}
        chunks.append(format_rows([record], header, with_header=False))
        data = "".join(chunks).encode("utf-8")
        # One write of one complete line: with O_APPEND it lands at the end as a unit.
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"{path}: short write ({written} of {len(data)} bytes)")
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock
    if created:
        _fsync_dir(path.parent)  # make the new file's directory entry durable too
    return dataclasses.replace(new_row, source=path)


def _read_all(fd: int, size: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)  # O_APPEND writes still go to the end whatever the offset
    parts, remaining = [], size
    while remaining > 0:
        part = os.read(fd, remaining)
        if not part:
            break
        parts.append(part)
        remaining -= len(part)
    return b"".join(parts)


def _fsync_dir(directory: Path) -> None:
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # some filesystems do not allow opening a directory; the data itself is synced
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
