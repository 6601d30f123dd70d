"""The report: the paper's numbers come back, warnings are repeated, figures are drawn."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from eval_sheet_helpers import write_csv

from eval_protocols.cli import main
from eval_protocols.paper import PAPER_RESULTS, PAPER_TRIALS


def _summarize(tmp_path: Path, *sheets: Path, extra: tuple[str, ...] = ()) -> Path:
    out = tmp_path / "report"
    argv = ["summarize", *map(str, sheets), "--out", str(out), "--bootstrap-resamples", "500",
            "--permutation-resamples", "500", *extra]
    assert main(argv) == 0
    return out


def test_paper_sheet_gives_back_paper_counts_and_means(tmp_path: Path, paper_sheet: Path) -> None:
    out = _summarize(tmp_path, paper_sheet)
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == ["mqe", "gcbc", "gciql", "tra"]  # reference first, then by name
    for task, by_policy in PAPER_RESULTS.items():
        for policy, (progress, successes) in by_policy.items():
            cell = summary[policy][task]
            assert (cell["trials"], cell["successes"]) == (PAPER_TRIALS, successes)
            assert round(cell["progress_mean"], 2) == progress
            assert cell["warnings"] == []
    mqe, gcbc = summary["mqe"]["single_pnp"], summary["gcbc"]["single_pnp"]
    # single_pnp progress is 0/1 per trial: SE = sqrt(p(1-p) * n/(n-1) / n) with ddof=1.
    assert mqe["progress_se"] == pytest.approx(np.sqrt(0.8 * 0.2 / 14))
    assert mqe["pvalue_success"] is None and gcbc["reference"] == "mqe"
    assert 0 < gcbc["pvalue_success"] < 0.05 and 0 < gcbc["pvalue_progress"] < 0.05
    assert gcbc["success_ci95"][0] < 5 / 15 < gcbc["success_ci95"][1]
    assert (gcbc["bootstrap_seed"], gcbc["bootstrap_resamples"]) == (0, 500)
    table = (out / "summary.md").read_text()
    assert "| Single PnP | 0.80 ± 0.11 (12/15) | 0.33 ± 0.13 (5/15) | 0.67 ± 0.13 (10/15) | 0.60 ± 0.13 (9/15) |" in table
    assert "None: every policy has the trials the protocol asks." in table
    tex = (out / "summary.tex").read_text()
    assert r"Open Drawer \& Place & $\mathbf{0.63} \pm" in tex


def test_progress_figure_is_written_and_not_empty(tmp_path: Path, paper_sheet: Path) -> None:
    import matplotlib.image

    out = _summarize(tmp_path, paper_sheet)
    image = matplotlib.image.imread(out / "progress.png")
    assert image.shape[0] > 200 and image.shape[1] > 400
    rgb = image[..., :3].reshape(-1, 3)
    # Bars in four colours, not a blank canvas: many distinct colours, some far from white.
    assert len(np.unique(np.round(rgb, 2), axis=0)) > 20
    assert (rgb.sum(axis=1) < 1.5).mean() > 0.02


def test_reference_choice_and_unknown_reference(tmp_path: Path, paper_sheet: Path, capsys) -> None:
    out = _summarize(tmp_path, paper_sheet, extra=("--reference", "tra"))
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary)[0] == "tra" and summary["mqe"]["open_drawer"]["reference"] == "tra"
    assert main(["summarize", str(paper_sheet), "--out", str(tmp_path / "r2"), "--reference", "rt1"]) == 2
    assert "reference policy 'rt1' is not in the sheets" in capsys.readouterr().err


def test_missing_trials_warn_in_every_output(tmp_path: Path) -> None:
    records = [{"policy": "mqe", "task": "double_pnp", "trial": t, "points": 2} for t in (1, 2, 4)]
    records += [{"policy": "gcbc", "task": "double_pnp", "trial": t, "points": 1} for t in range(1, 16)]
    records += [{"policy": "gcbc", "task": "single_pnp", "trial": 1, "points": 0}]
    out = _summarize(tmp_path, write_csv(tmp_path / "short.csv", records))
    summary = json.loads((out / "summary.json").read_text())
    warnings = summary["mqe"]["double_pnp"]["warnings"]
    assert "policy mqe, task double_pnp: 3 trials, the protocol asks 15" in warnings
    assert "policy mqe, task double_pnp: trial number(s) [3] missing from the sheets" in warnings
    # A task a policy never ran still gets a cell that says so, not a hole.
    assert summary["mqe"]["single_pnp"]["trials"] == 0
    assert summary["mqe"]["single_pnp"]["progress_mean"] is None
    md = (out / "summary.md").read_text()
    assert "- policy mqe, task double_pnp: 3 trials, the protocol asks 15" in md
    assert "- policy mqe, task single_pnp: 0 trials, the protocol asks 15" in md
    assert "no trials (0/15)" in md


def test_mixed_fingerprints_warn(tmp_path: Path) -> None:
    records = [{"policy": "mqe", "task": "single_pnp", "trial": t, "points": 1,
                "policy_fingerprint": "aaa" if t < 8 else "bbb"} for t in range(1, 16)]
    out = _summarize(tmp_path, write_csv(tmp_path / "s.csv", records))
    assert "2 different policy fingerprints ['aaa', 'bbb']" in (out / "summary.md").read_text()


def _write_steps(trial_dir: Path, distances: list[float | None], torn_tail: str = "") -> None:
    trial_dir.mkdir(parents=True)
    lines = [json.dumps({"step": i, "distance": d, "action": [0.0] * 7}) for i, d in enumerate(distances)]
    (trial_dir / "steps.jsonl").write_text("\n".join(lines) + "\n" + torn_tail)


def test_distance_curves_from_trial_dirs(tmp_path: Path) -> None:
    _write_steps(tmp_path / "trials/1", [30.0, 22.5, None, 10.0, 2.0])
    _write_steps(tmp_path / "trials/2", [28.0, 27.0, 29.0], torn_tail='{"step": 3, "dist')
    _write_steps(tmp_path / "trials/3", [5.0], torn_tail="")
    (tmp_path / "trials/3/steps.jsonl").write_text('{"step": 0, "distance": 5}\nnot json\n{"step": 2, "distance": 1}\n')
    records = [
        {"policy": "mqe", "task": "single_pnp", "trial": 1, "points": 1, "trial_dir": "trials/1"},
        {"policy": "mqe", "task": "single_pnp", "trial": 2, "points": 0, "trial_dir": str(tmp_path / "trials/2")},
        {"policy": "mqe", "task": "single_pnp", "trial": 3, "points": 0, "trial_dir": "trials/3"},
        {"policy": "mqe", "task": "single_pnp", "trial": 4, "points": 0, "trial_dir": "trials/missing"},
    ]
    out = _summarize(tmp_path, write_csv(tmp_path / "s.csv", records))
    assert (out / "distance_curves" / "mqe__single_pnp.png").stat().st_size > 5_000
    md = (out / "summary.md").read_text()
    assert "steps.jsonl line 4: incomplete last line skipped" in md
    assert "steps.jsonl line 2: bad record" in md
    assert "trials/missing: trial directory not found" in md


def test_a_policy_without_distances_gets_one_note_not_one_per_trial(tmp_path: Path) -> None:
    for n in (1, 2, 3):
        _write_steps(tmp_path / f"gcbc/{n}", [None, None])
    _write_steps(tmp_path / "mqe/1", [3.0, 2.0])
    _write_steps(tmp_path / "mqe/2", [None, None])
    records = [{"policy": "gcbc", "task": "single_pnp", "trial": n, "points": 0, "trial_dir": f"gcbc/{n}"}
               for n in (1, 2, 3)]
    records += [{"policy": "mqe", "task": "single_pnp", "trial": n, "points": 0, "trial_dir": f"mqe/{n}"}
                for n in (1, 2)]
    out = _summarize(tmp_path, write_csv(tmp_path / "s.csv", records))
    md = (out / "summary.md").read_text()
    assert md.count("gcbc/single_pnp: the policy reported no distance (null) in any of its 3 trial(s)") == 1
    assert md.count("policy reported no distance (null) at every step") == 1  # mqe's trial 2 only
    assert not (out / "distance_curves" / "gcbc__single_pnp.png").exists()
    assert (out / "distance_curves" / "mqe__single_pnp.png").exists()
