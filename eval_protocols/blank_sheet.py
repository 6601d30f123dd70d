"""Blank scoring sheets: the randomised trial order, as CSV and as a printable HTML page."""

from __future__ import annotations

import dataclasses
import html
import logging
import random
from collections.abc import Mapping, Sequence

from eval_protocols.sheets import COLUMNS, format_rows
from eval_protocols.tasks import Task

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class PlannedTrial:
    """One trial to run: its place in the order, the (blinded) policy, the task, the trial number."""

    run: int  # 1-based position in the run order within the whole sheet
    policy: str  # label (A, B, ...) when blinded, else the policy name
    task: Task
    trial: int  # 1-based trial number of this policy on this task


def plan_trials(policies: Sequence[str], tasks: Sequence[Task], seed: int,
                trials: int | None = None) -> list[PlannedTrial]:
    """The run order: task by task; within a task, rounds in which each policy runs once, shuffled.

    Tasks stay in blocks because setting up a scene is slow. Within a task, each round holds
    every policy once in a fresh random order (randomised complete blocks): a drift over the
    session (light, battery, wear of the objects) then touches every policy alike, and the
    operator cannot predict which policy comes next.
    """
    rng = random.Random(seed)
    plan: list[PlannedTrial] = []
    for task in tasks:
        for round_index in range(trials or task.trials):
            order = list(policies)
            rng.shuffle(order)
            for policy in order:
                plan.append(PlannedTrial(run=len(plan) + 1, policy=policy, task=task, trial=round_index + 1))
    return plan


def blank_csv(plan: Sequence[PlannedTrial], operator: str = "", date: str = "") -> str:
    """The plan as a scoring sheet with the points left empty, rows in run order."""
    records = []
    for p in plan:
        record = dict.fromkeys(COLUMNS, "")
        record.update(policy=p.policy, task=p.task.name, trial=str(p.trial),
                      max_points=str(p.task.max_points), operator=operator, date=date)
        records.append(record)
    return format_rows(records)


_CSS = """
body { font-family: Helvetica, Arial, sans-serif; font-size: 11pt; margin: 1.5cm; }
h1 { font-size: 16pt; margin-bottom: 0.2em; }
h2 { font-size: 13pt; margin: 0.2em 0; }
.meta { margin: 0.5em 0 1em; }
.meta span { display: inline-block; min-width: 16em; margin-right: 2em; }
.rule { margin: 0.2em 0 0.6em; font-style: italic; }
table { border-collapse: collapse; width: 100%; }
th, td { border: 1px solid #333; padding: 0.35em 0.5em; text-align: left; }
th { background: #eee; }
td.write { width: 7em; }
td.notes { width: 40%; }
section { page-break-after: always; break-after: page; }
section:last-of-type { page-break-after: auto; break-after: auto; }
thead { display: table-header-group; }  /* repeat the column names on every printed page */
tr { page-break-inside: avoid; break-inside: avoid; }
@media print { body { margin: 0; } @page { size: A4; margin: 1.5cm; } }
"""


def blank_html(plan: Sequence[PlannedTrial], blinded: bool, title: str = "Scoring sheet") -> str:
    """A printable page: one section per task with its scoring rule and a row per trial."""
    by_task: dict[str, list[PlannedTrial]] = {}
    for p in plan:
        by_task.setdefault(p.task.name, []).append(p)
    esc = html.escape
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
    ]
    note = ("Policies are blinded: score what you see; the label does not tell which policy runs."
            if blinded else "Policies are not blinded.")
    for name, trials in by_task.items():
        task = trials[0].task
        parts += [
            "<section>",
            f"<h1>{esc(title)}</h1>",
            '<div class="meta"><span>Operator: ____________________</span><span>Date: ______________</span></div>',
            f"<p>{esc(note)} Run the trials in the order of the <b>Run</b> column.</p>",
            f"<h2>{esc(task.title)} <small>({esc(name)}, max {task.max_points} point"
            f"{'s' if task.max_points > 1 else ''})</small></h2>",
            f"<p>{esc(task.description)}</p>",
            f'<p class="rule">Scoring: {esc(task.scoring)} Success = {task.max_points} of {task.max_points}.</p>',
            "<table><thead><tr><th>Run</th><th>Policy</th><th>Trial</th>"
            "<th>Points</th><th>Notes</th></tr></thead><tbody>",
        ]
        for p in trials:
            parts.append(f"<tr><td>{p.run}</td><td>{esc(p.policy)}</td><td>{p.trial}</td>"
                         f'<td class="write">&nbsp;&nbsp;&nbsp;&nbsp; / {task.max_points}</td><td class="notes"></td></tr>')
        parts += ["</tbody></table>", "</section>"]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def describe_plan(plan: Sequence[PlannedTrial]) -> Mapping[str, int]:
    """Trials per task in the plan, for the CLI's summary line."""
    counts: dict[str, int] = {}
    for p in plan:
        counts[p.task.name] = counts.get(p.task.name, 0) + 1
    return counts
