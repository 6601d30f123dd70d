"""`mqe-ogbench table`: the results table from the rows that `mqe-ogbench train` wrote.

    mqe-ogbench table runs/ogbench                        # Markdown on stdout
    mqe-ogbench table runs/ogbench --out table.md

Reads every `<dir>/<dataset>/<agent>.json` and prints one line per dataset: the updates, then for each
agent our success % (mean ± standard error over seeds) beside the paper's where it gives one. A run
that has no row yet (stopped before its final evaluation) but whose run directories
(`<dir>/<dataset>/<agent>/seed*/metrics.jsonl`) hold evaluations is scored from those, marked `*`,
with a note under the table naming the evaluations used. A row trained with `--set` overrides beyond
the protocol is marked `†`, with a note naming them. A dataset or agent with neither shows "—".
Bad input (no rows, an unreadable row): one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import tyro

from mqe_model.metrics import read_evaluations
from mqe_model.ogbench.generate import versioned_name
from mqe_model.ogbench.reproduce import (
    PAPER_RESULTS,
    RUN_DIR_NAME,
    SCORED_EVALUATIONS,
    run_seeds,
    seed_score,
    standard_error,
    success_key,
)

AGENTS = ("mqe", "gciql", "gcbc")
MISSING = "—"


class TableError(ValueError):
    """The rows cannot be read; the message names the file."""


def read_rows(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Rows by (dataset, agent) from `<root>/<dataset>/<agent>.json`."""
    if not root.is_dir():
        raise TableError(f"{root}: no such directory")
    rows = {}
    for path in sorted(root.glob("*/*.json")):
        if path.stem not in AGENTS:
            continue
        try:
            row = json.loads(path.read_text())
            rows[(row["dataset"], row["agent"])] = row
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise TableError(f"{path}: not a row written by mqe-ogbench train ({e})") from None
    for dataset_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for agent in AGENTS:
            key = (versioned_name(dataset_dir.name), agent)
            if key not in rows and (partial := partial_row(dataset_dir / agent, *key)) is not None:
                rows[key] = partial
    if not rows:
        raise TableError(f"{root}: no rows (<dataset>/<agent>.json); run mqe-ogbench train first")
    return rows


def partial_row(agent_dir: Path, dataset: str, agent: str) -> dict[str, Any] | None:
    """A row from the evaluations an unfinished run has logged so far (None if it has none): each
    seed scored by the mean of its last (at most 3) evaluations, like a finished run."""
    scores, eval_steps, seeds, trained = [], set(), [], 0
    # Run directories only: not the `--gpus` logs (`seed0.log`) or anything else a user put there.
    for run_dir in sorted(p for p in agent_dir.glob("seed*") if p.is_dir() and RUN_DIR_NAME.fullmatch(p.name)):
        run = run_seeds(run_dir.name)
        for index, seed in enumerate(run):
            key = success_key(index, len(run))
            evaluations = read_evaluations(run_dir, key)
            if evaluations:
                scores.append(100.0 * seed_score(evaluations, key))
                eval_steps.update(row["step"] for row in evaluations[-SCORED_EVALUATIONS:])
                seeds.append(seed)
        trained = max([trained] + [row["step"] for row in read_evaluations(run_dir, "perf/steps_per_s")])
    if not scores:
        return None
    return {"dataset": dataset, "agent": agent, "success_mean": float(np.mean(scores)),
            "success_sem": standard_error(np.array(scores)),
            "steps": trained, "seeds": seeds, "partial": {"eval_steps": sorted(eval_steps)}}


def score(mean: float, sem: float | None) -> str:
    """'57.3 ± 4.0' (or the mean alone for one seed)."""
    return f"{mean:.1f}" if sem is None else f"{mean:.1f} ± {sem:.1f}"


def updates(steps: set[int]) -> str:
    """'110k', or '90k-110k' when the dataset's agents trained for different numbers of updates."""
    labels = [f"{s // 1000}k" if s % 1000 == 0 else str(s) for s in sorted(steps)]
    return "-".join(labels[:: max(1, len(labels) - 1)])


def markdown_table(rows: dict[tuple[str, str], dict[str, Any]]) -> str:
    """One line per dataset, our and the paper's success for each agent, and the seeds behind ours."""
    header = ["dataset", "updates", "seeds"]
    for agent in AGENTS:
        header += [f"{agent.upper()} (paper)", f"{agent.upper()} (ours)"]
    lines, notes, overrides = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)], [], []
    for dataset in sorted({d for d, _ in rows}):
        mine = [rows[(dataset, a)] for a in AGENTS if (dataset, a) in rows]
        cells = [dataset.removesuffix("-v0"), updates({r["steps"] for r in mine}),
                 "/".join(sorted({str(len(r["seeds"])) for r in mine}))]
        for agent in AGENTS:
            paper = PAPER_RESULTS.get((agent, dataset))
            row = rows.get((dataset, agent))
            ours = MISSING if row is None else score(row["success_mean"], row["success_sem"])
            if row is not None and "partial" in row:
                ours += "*"
                notes.append(f"{dataset.removesuffix('-v0')} {agent}: unfinished (trained to {row['steps']} "
                             f"updates), scored from the evaluations at {', '.join(map(str, row['partial']['eval_steps']))}")
            if row is not None and row.get("overrides"):
                ours += "†"
                overrides.append(f"{dataset.removesuffix('-v0')} {agent}: trained with `--set "
                                 f"{' '.join(row['overrides'])}` beyond the protocol")
            cells += [score(*paper) if paper else MISSING, ours]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *[f"\\* {note}" for note in notes]] if notes else []
    lines += ["", *[f"† {note}" for note in overrides]] if overrides else []
    return "\n".join(lines) + "\n"


@dataclasses.dataclass(frozen=True)
class TableConfig:
    """Print the OGBench results table from the rows of `mqe-ogbench train`."""

    # directory holding <dataset>/<agent>.json (the --runs-dir of mqe-ogbench train)
    rows_dir: Annotated[Path, tyro.conf.Positional, tyro.conf.arg(metavar="ROWS_DIR")]
    out: Path | None = None  # write the table here instead of stdout


def run(cfg: TableConfig, command: str) -> int:
    """`mqe-ogbench table`: print or write the table; the exit code (2 for bad input)."""
    try:
        table = markdown_table(read_rows(cfg.rows_dir))
    except TableError as e:
        print(f"mqe-ogbench table: error: {e}", file=sys.stderr)
        return 2
    if cfg.out is None:
        sys.stdout.write(table)
    else:
        cfg.out.write_text(table)
    return 0
