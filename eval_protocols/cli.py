"""`mqe-report`: print blank, blinded scoring sheets; summarize scored sheets into a report.

    mqe-report sheet --policies mqe gcbc --out sheets/2025-03-14
    mqe-report summarize sheets/2025-03-14/sheet.csv --key sheets/2025-03-14/blinding_key.json --out report/
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import secrets
import sys
from pathlib import Path

import tyro

from eval_protocols.blank_sheet import blank_csv, blank_html, describe_plan, plan_trials
from eval_protocols.blinding import BlindingKey, blind_labels, make_key, read_key, write_key
from eval_protocols.sheets import SheetError, TrialRow, check_duplicates, read_sheet
from eval_protocols.tasks import Task, TaskError, load_tasks

logger = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2


@dataclasses.dataclass(frozen=True)
class SheetConfig:
    """Write blank scoring sheets (CSV + printable HTML) in a randomised order, policies blinded."""

    policies: tuple[str, ...]  # policies to evaluate, by the names the report should use, e.g. --policies mqe gcbc
    out: Path  # folder for SHEET.csv and SHEET.html (created if needed)
    tasks: tuple[str, ...] = ()  # tasks to include, in the order they are run; default: every known task
    trials: int | None = None  # trials per policy and task; default: each task's protocol count (15)
    blind: bool = True  # hide the policies behind labels A, B, C; --no-blind prints the names
    key: Path | None = None  # where the blinding key goes; default OUT/blinding_key.json (keep it from the operator)
    seed: int | None = None  # seed of labels and order; default: fresh randomness, recorded in the key
    name: str = "sheet"  # file name stem of the CSV and HTML
    operator: str = ""  # pre-fill the operator column
    date: str = ""  # pre-fill the date column (ISO 8601, e.g. 2025-03-14)
    task_file: tuple[Path, ...] = ()  # extra TOML task files (a lab's own tasks); $MQE_TASKS works too
    force: bool = False  # overwrite existing sheet and key files

    def __post_init__(self) -> None:
        if not self.policies:
            raise ValueError("give at least one policy: --policies mqe gcbc ...")
        if len(set(self.policies)) != len(self.policies):
            raise ValueError(f"--policies has a name twice: {list(self.policies)}")
        if self.trials is not None and self.trials < 1:
            raise ValueError(f"--trials must be >= 1, got {self.trials}")
        if self.date:
            try:
                datetime.date.fromisoformat(self.date)
            except ValueError:
                raise ValueError(f"--date '{self.date}' is not an ISO date like 2025-03-14") from None


@dataclasses.dataclass(frozen=True)
class SummarizeConfig:
    """Validate scored sheets and write summary.json, summary.md, summary.tex and progress.png."""

    sheets: tyro.conf.Positional[tuple[Path, ...]]  # scored sheet CSV files (one or more)
    out: Path  # folder for the report (created if needed)
    # Blinding keys: KEY.json applies to every sheet; SHEET.csv=KEY.json to that sheet only.
    key: tuple[str, ...] = ()
    reference: str | None = None  # policy to compare the others with; default 'mqe' if present, else the first by name
    seed: int = 0  # seed of the bootstrap and the permutation test (recorded in summary.json)
    bootstrap_resamples: int = 10_000  # resamples of the percentile bootstrap of mean progress
    permutation_resamples: int = 10_000  # resamples of the permutation test against the reference
    task_file: tuple[Path, ...] = ()  # extra TOML task files (a lab's own tasks); $MQE_TASKS works too

    def __post_init__(self) -> None:
        if not self.sheets:
            raise ValueError("give at least one sheet: mqe-report summarize SHEET.csv --out DIR")


def _select_tasks(all_tasks: dict[str, Task], names: tuple[str, ...]) -> list[Task]:
    unknown = [n for n in names if n not in all_tasks]
    if unknown:
        raise TaskError(f"unknown task(s) {unknown}; known tasks: {', '.join(all_tasks)}")
    return [all_tasks[n] for n in names] if names else list(all_tasks.values())


def run_sheet(config: SheetConfig) -> list[Path]:
    """Write the blank sheet (and key when blinded); returns the files written."""
    tasks = _select_tasks(load_tasks(list(config.task_file)), config.tasks)
    seed = config.seed if config.seed is not None else secrets.randbits(32)
    csv_path = config.out / f"{config.name}.csv"
    html_path = config.out / f"{config.name}.html"
    key_path = (config.key or config.out / "blinding_key.json") if config.blind else None
    targets = [p for p in (csv_path, html_path, key_path) if p is not None]
    existing = [str(p) for p in targets if p.exists()]
    if existing and not config.force:
        raise SheetError(f"{', '.join(existing)} already exist(s); choose another --out or --name, or pass --force")
    if config.blind:
        key = make_key(config.policies, seed, sheet=csv_path.name)
        policy_names = list(key.labels)  # the labels, in order A, B, ...
    else:
        policy_names = list(config.policies)
    plan = plan_trials(policy_names, tasks, seed, config.trials)
    config.out.mkdir(parents=True, exist_ok=True)
    csv_path.write_text(blank_csv(plan, operator=config.operator, date=config.date))
    html_path.write_text(blank_html(plan, blinded=config.blind, title=f"Scoring sheet {config.name}"))
    if key_path is not None:
        key_path.parent.mkdir(parents=True, exist_ok=True)
        write_key(key, key_path)
    counts = ", ".join(f"{t} {n}" for t, n in describe_plan(plan).items())
    logger.info("%d trials (%s), seed %d%s", len(plan), counts, seed,
                f"; labels {', '.join(blind_labels(len(config.policies)))}" if config.blind else "")
    return targets


def _parse_keys(entries: tuple[str, ...], sheets: tuple[Path, ...]) -> dict[Path, BlindingKey]:
    """Which key unblinds which sheet."""
    per_sheet: dict[Path, BlindingKey] = {}
    for entry in entries:
        sheet_part, sep, key_part = entry.rpartition("=")
        if sep:
            target = Path(sheet_part)
            if target not in sheets:
                raise SheetError(f"--key {entry}: {sheet_part} is not one of the sheets given")
            per_sheet[target] = read_key(key_part)
        else:
            key = read_key(entry)
            for sheet in sheets:
                per_sheet.setdefault(sheet, key)
    return per_sheet


def load_rows(sheets: tuple[Path, ...], key_entries: tuple[str, ...], tasks: dict[str, Task]) -> list[TrialRow]:
    """Read every sheet, unblind those with a key, and refuse duplicates across sheets."""
    keys = _parse_keys(key_entries, sheets)
    rows: list[TrialRow] = []
    for sheet in sheets:
        sheet_rows = read_sheet(sheet, tasks)
        if not sheet_rows:
            raise SheetError(f"{sheet}: no scored trials (only a header)")
        rows += keys[sheet].unblind(sheet_rows) if sheet in keys else sheet_rows
    check_duplicates(rows)
    return rows


def run_summarize(config: SummarizeConfig) -> list[Path]:
    """Validate the sheets and write the report; returns the files written."""
    from eval_protocols import plots, report  # scipy and matplotlib only for this command

    tasks = load_tasks(list(config.task_file))
    rows = load_rows(config.sheets, config.key, tasks)
    report_config = report.ReportConfig(reference=config.reference, seed=config.seed,
                                        bootstrap_resamples=config.bootstrap_resamples,
                                        permutation_resamples=config.permutation_resamples)
    summary = report.summarize(rows, tasks, report_config)
    config.out.mkdir(parents=True, exist_ok=True)
    # Curves first: trial-log problems become warnings that the files below repeat.
    written = plots.plot_distance_curves(rows, summary, config.out / "distance_curves")
    paths = {name: config.out / name for name in ("summary.json", "summary.md", "summary.tex", "progress.png")}
    report.write_json(summary, paths["summary.json"])
    paths["summary.md"].write_text(report.markdown(summary, [str(s) for s in config.sheets]))
    paths["summary.tex"].write_text(report.latex(summary))
    plots.plot_progress(summary, paths["progress.png"])
    warnings = report.all_warnings(summary)
    if warnings:
        logger.warning("%d warning(s); they are repeated in %s", len(warnings), paths["summary.md"])
    return [*paths.values(), *written]


def main(argv: list[str] | None = None) -> int:
    """Entry point of `mqe-report`; bad input gives one line on stderr and exit code 2."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s", stream=sys.stderr)
    try:
        config = tyro.extras.subcommand_cli_from_dict(
            {"sheet": SheetConfig, "summarize": SummarizeConfig}, args=argv, prog="mqe-report",
            description=__doc__.split("\n")[0])
        files = run_sheet(config) if isinstance(config, SheetConfig) else run_summarize(config)
    except (SheetError, TaskError, ValueError, RuntimeError, OSError) as e:
        print(f"mqe-report: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for path in files:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
