"""Figures of the report: grouped task-progress bars and per-trial distance-to-goal curves."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from eval_protocols.report import Summary
from eval_protocols.sheets import TrialRow
from eval_protocols.trial_logs import read_distance_curve

logger = logging.getLogger(__name__)


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("matplotlib not found: install the eval extra (pip install 'mqe-deploy[eval]')") from None
    matplotlib.use("Agg")  # files only: no display on a robot PC or in CI
    import matplotlib.pyplot as plt

    return plt


def plot_progress(summary: Summary, path: Path, dpi: int = 110) -> None:
    """Grouped bars: one group per task, one bar per policy, height = mean progress, error bar = SE."""
    plt = _pyplot()
    policies = list(summary)
    tasks = list(next(iter(summary.values())))
    titles = [summary[policies[0]][t]["task_title"] for t in tasks]
    width = 0.8 / len(policies)
    x = np.arange(len(tasks))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(tasks) + 1.5), 3.6))
    colors = plt.get_cmap("tab10").colors
    for i, policy in enumerate(policies):
        means = [summary[policy][t]["progress_mean"] for t in tasks]
        ses = [summary[policy][t]["progress_se"] for t in tasks]
        ax.bar(x + (i - (len(policies) - 1) / 2) * width, np.nan_to_num(means), width,
               yerr=[0.0 if not math.isfinite(s) else s for s in ses], capsize=2,
               label=policy, color=colors[i % len(colors)], edgecolor="black", linewidth=0.4,
               error_kw={"elinewidth": 0.8})
    ax.set_xticks(x, [t.replace(" & ", " &\n") for t in titles], fontsize=8)
    ax.set_ylabel("Task progress (mean ± SE)")
    ax.set_ylim(0, 1.05)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(ncols=min(len(policies), 6), fontsize=8, frameon=False, loc="upper center",
              bbox_to_anchor=(0.5, 1.14))
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "policy"


def plot_distance_curves(rows: Sequence[TrialRow], summary: Summary, out_dir: Path) -> list[Path]:
    """One figure per policy and task with a trial directory: MQE distance to goal over steps.

    Reading problems become warnings of the cell in `summary`, so the report repeats them.
    """
    with_dirs = [r for r in rows if r.trial_dir]
    if not with_dirs:
        return []
    plt = _pyplot()
    groups: dict[tuple[str, str], list[TrialRow]] = {}
    for row in with_dirs:
        groups.setdefault((row.policy, row.task), []).append(row)
    written = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for (policy, task), trials in groups.items():
        cell = summary[policy][task]
        fig, ax = plt.subplots(figsize=(5.0, 3.2))
        drawn, without_distance = 0, []
        for row in sorted(trials, key=lambda r: r.trial):
            trial_dir = row.resolved_trial_dir()
            assert trial_dir is not None  # rows were filtered on trial_dir above
            curve, warnings = read_distance_curve(trial_dir)
            for w in warnings:
                logger.warning("%s: %s", row.where, w)
                cell["warnings"].append(f"{row.where}: {w}")
            if curve is None:
                continue
            if all(math.isnan(d) for d in curve.distances):
                without_distance.append(row)
                continue
            ax.plot(curve.steps, curve.distances, linewidth=1.0, alpha=0.8,
                    color="tab:green" if row.success else "tab:red")
            drawn += 1
        # A policy without a quasimetric critic (GCBC, GCIQL) answers no distance in any trial: one
        # line for the cell, not one per trial; a policy that sometimes does is flagged per trial.
        if without_distance and not drawn:
            messages = [f"{policy}/{task}: the policy reported no distance (null) in any of its "
                        f"{len(without_distance)} trial(s) (no quasimetric critic); no distance plot"]
        else:
            messages = [f"{row.where}: policy reported no distance (null) at every step"
                        for row in without_distance]
        for message in messages:
            logger.warning(message)
            cell["warnings"].append(message)
        if not drawn:
            plt.close(fig)
            continue
        ax.set_title(f"{policy}: {cell['task_title']} ({drawn} trials; green = success)", fontsize=9)
        ax.set_xlabel("Step")
        ax.set_ylabel("MQE distance to goal (steps)")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out_dir / f"{_slug(policy)}__{_slug(task)}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
