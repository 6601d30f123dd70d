"""The evaluation report: per policy and task statistics, written as JSON, Markdown and LaTeX."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eval_protocols import stats
from eval_protocols.sheets import TrialRow
from eval_protocols.tasks import Task

logger = logging.getLogger(__name__)

Cell = dict[str, Any]  # the statistics of one policy on one task, as written to summary.json
Summary = dict[str, dict[str, Cell]]  # policy -> task -> Cell


@dataclasses.dataclass(frozen=True)
class ReportConfig:
    """How the statistics are computed."""

    reference: str | None = None  # policy the others are compared with; None: 'mqe' if present, else the first by name
    seed: int = 0  # seed of the bootstrap and the permutation test, recorded in summary.json
    bootstrap_resamples: int = 10_000  # resamples of the percentile bootstrap of the progress mean
    permutation_resamples: int = 10_000  # resamples of the permutation test (exact when there are fewer splits)

    def __post_init__(self) -> None:
        if self.bootstrap_resamples < 100 or self.permutation_resamples < 100:
            raise ValueError("use at least 100 bootstrap and permutation resamples (10000 is the default)")


def choose_reference(policies: Sequence[str], requested: str | None) -> str:
    """The reference policy: the requested one (which must exist), else 'mqe', else the first by name."""
    if requested is not None:
        if requested not in policies:
            raise ValueError(f"reference policy '{requested}' is not in the sheets; policies: {', '.join(policies)}")
        return requested
    return "mqe" if "mqe" in policies else sorted(policies)[0]


def order_policies(policies: Sequence[str], reference: str) -> list[str]:
    """Reference first, then the others by name: a stable column order for tables and figures."""
    return [reference, *sorted(p for p in set(policies) if p != reference)]


def _group(rows: Sequence[TrialRow]) -> dict[tuple[str, str], list[TrialRow]]:
    groups: dict[tuple[str, str], list[TrialRow]] = {}
    for row in rows:
        groups.setdefault((row.policy, row.task), []).append(row)
    for trials in groups.values():
        trials.sort(key=lambda r: r.trial)
    return groups


def _completeness_warnings(policy: str, task: Task, trials: Sequence[TrialRow]) -> list[str]:
    warnings = []
    if len(trials) < task.trials:
        warnings.append(f"policy {policy}, task {task.name}: {len(trials)} trials, the protocol asks {task.trials}")
    numbers = {r.trial for r in trials}
    gaps = sorted(set(range(1, max(numbers, default=0) + 1)) - numbers)
    if gaps:
        warnings.append(f"policy {policy}, task {task.name}: trial number(s) {gaps} missing from the sheets")
    fingerprints = sorted({r.policy_fingerprint for r in trials if r.policy_fingerprint})
    if len(fingerprints) > 1:
        warnings.append(f"policy {policy}, task {task.name}: trials ran with {len(fingerprints)} different "
                        f"policy fingerprints {fingerprints}: not one checkpoint")
    return warnings


def summarize(rows: Sequence[TrialRow], tasks: Mapping[str, Task], config: ReportConfig) -> Summary:
    """Statistics per policy and task, each compared with the reference policy on the same task."""
    if not rows:
        raise ValueError("no trials to summarize")
    groups = _group(rows)
    reference = choose_reference(sorted({r.policy for r in rows}), config.reference)
    policies = order_policies([r.policy for r in rows], reference)
    task_names = [name for name in tasks if any(r.task == name for r in rows)]
    summary: Summary = {}
    for policy in policies:
        summary[policy] = {}
        for name in task_names:
            task = tasks[name]
            trials = groups.get((policy, name), [])
            cell = _cell(policy, task, trials, groups.get((reference, name), []), reference, config)
            for w in cell["warnings"]:
                logger.warning(w)
            summary[policy][name] = cell
    return summary


def _cell(policy: str, task: Task, trials: Sequence[TrialRow], ref_trials: Sequence[TrialRow],
          reference: str, config: ReportConfig) -> Cell:
    progress = [r.progress for r in trials]
    n, successes = len(trials), sum(r.success for r in trials)
    mean, se = stats.mean_and_se(progress)
    cell: Cell = {
        "task_title": task.title,
        "trials": n,
        "trials_expected": task.trials,
        "successes": successes,
        "success_rate": successes / n if n else math.nan,
        "success_ci95": list(stats.wilson_interval(successes, n)) if n else [math.nan, math.nan],
        "max_points": task.max_points,
        "progress_mean": mean,
        "progress_se": se,
        "progress_ci95": list(stats.bootstrap_mean_ci(progress, config.seed, config.bootstrap_resamples)),
        "reference": reference,
        "pvalue_success": math.nan,
        "pvalue_progress": math.nan,
        "bootstrap_seed": config.seed,
        "bootstrap_resamples": config.bootstrap_resamples,
        "permutation_seed": config.seed,
        "permutation_resamples": config.permutation_resamples,
        "points": [r.points for r in trials],  # in trial order, so the numbers above can be recomputed
        "trial_numbers": [r.trial for r in trials],
        "policy_fingerprints": sorted({r.policy_fingerprint for r in trials if r.policy_fingerprint}),
        "warnings": _completeness_warnings(policy, task, trials),
    }
    if policy != reference and n and ref_trials:
        ref_successes = sum(r.success for r in ref_trials)
        cell["pvalue_success"] = stats.fisher_pvalue(successes, n, ref_successes, len(ref_trials))
        cell["pvalue_progress"] = stats.permutation_pvalue(
            progress, [r.progress for r in ref_trials], config.seed, config.permutation_resamples)
    return cell


def all_warnings(summary: Summary) -> list[str]:
    """Every warning of every cell, in table order."""
    return [w for tasks in summary.values() for cell in tasks.values() for w in cell["warnings"]]


def _json_ready(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; null means 'undefined' (e.g. SE of one trial)
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    return value


def write_json(summary: Summary, path: Path) -> None:
    """summary.json: policy -> task -> cell; NaN written as null."""
    path.write_text(json.dumps(_json_ready(summary), indent=2) + "\n")


def _fmt(x: float, digits: int = 2) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.{digits}f}"


def _fmt_p(p: float) -> str:
    if not math.isfinite(p):
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _progress_cell(cell: Cell) -> str:
    if not cell["trials"]:
        return f"no trials (0/{cell['trials_expected']})"
    se = f" ± {_fmt(cell['progress_se'])}" if math.isfinite(cell["progress_se"]) else ""
    return f"{_fmt(cell['progress_mean'])}{se} ({cell['successes']}/{cell['trials']})"


def markdown(summary: Summary, sources: Sequence[str] = ()) -> str:
    """summary.md: the paper-style table, the intervals and tests, the warnings and the method."""
    policies = list(summary)
    reference = next(iter(next(iter(summary.values())).values()))["reference"]
    first = next(iter(summary.values()))
    tasks = list(first)
    out = ["# Evaluation summary", ""]
    if sources:
        out += [f"Sheets: {', '.join(f'`{s}`' for s in sources)}.", ""]
    out += [f"Reference policy: **{reference}**.", "",
            "## Task progress and successes", "",
            "Task progress mean ± standard error over trials (successes / trials).", "",
            "| Task | " + " | ".join(policies) + " |",
            "| --- | " + " | ".join("---" for _ in policies) + " |"]
    for t in tasks:
        out.append(f"| {first[t]['task_title']} | " + " | ".join(_progress_cell(summary[p][t]) for p in policies) + " |")
    out += ["", f"## Intervals and comparison with {reference}", "",
            "| Task | Policy | Successes | Success 95% CI (Wilson) | Progress 95% CI (bootstrap) "
            "| p success (Fisher) | p progress (permutation) |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for t in tasks:
        for p in policies:
            c = summary[p][t]
            lo, hi = c["success_ci95"]
            plo, phi = c["progress_ci95"]
            out.append(f"| {c['task_title']} | {p} | {c['successes']}/{c['trials']} | [{_fmt(lo)}, {_fmt(hi)}] "
                       f"| [{_fmt(plo)}, {_fmt(phi)}] | {_fmt_p(c['pvalue_success'])} | {_fmt_p(c['pvalue_progress'])} |")
    warnings = all_warnings(summary)
    out += ["", "## Warnings", ""]
    out += [f"- {w}" for w in warnings] if warnings else ["None: every policy has the trials the protocol asks."]
    any_cell = first[tasks[0]]
    out += ["", "## Method", "",
            "- Task progress of a trial = points / max points; success = full points.",
            "- Standard error = sample standard deviation (ddof = 1) / sqrt(n).",
            "- Success 95% interval: Wilson score interval, z = 1.96.",
            f"- Progress 95% interval: percentile bootstrap of the mean, {any_cell['bootstrap_resamples']} "
            f"resamples, seed {any_cell['bootstrap_seed']}.",
            f"- p success: Fisher's exact test against {reference}, two-sided.",
            f"- p progress: permutation test of the difference of mean progress against {reference}, two-sided, "
            f"{any_cell['permutation_resamples']} resamples (exact when fewer splits exist), seed "
            f"{any_cell['permutation_seed']}.",
            "- No correction for multiple comparisons.", ""]
    return "\n".join(out)


_TEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}"}


def _tex_escape(text: str) -> str:
    return "".join(_TEX_SPECIALS.get(ch, ch) for ch in text)


def latex(summary: Summary) -> str:
    """summary.tex: a booktabs table like the paper's, the best progress per task in bold."""
    policies = list(summary)
    first = next(iter(summary.values()))
    out = [r"% Generated by mqe-report summarize. Needs \usepackage{booktabs}.",
           r"\begin{tabular}{l" + "c" * len(policies) + "}", r"\toprule",
           "Task & " + " & ".join(_tex_escape(p) for p in policies) + r" \\", r"\midrule"]
    for t, c0 in first.items():
        means = [summary[p][t]["progress_mean"] for p in policies]
        best = max((m for m in means if math.isfinite(m)), default=math.nan)
        cells = []
        for p in policies:
            c = summary[p][t]
            if not c["trials"]:
                cells.append("--")
                continue
            mean = _fmt(c["progress_mean"])
            # Bold every policy whose rounded mean ties the best, as the paper does.
            value = rf"\mathbf{{{mean}}}" if mean == _fmt(best) else mean
            se = rf" \pm {_fmt(c['progress_se'])}" if math.isfinite(c["progress_se"]) else ""
            cells.append(f"${value}{se}$ ({c['successes']}/{c['trials']})")
        out.append(f"{_tex_escape(c0['task_title'])} & " + " & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(out)
