"""mqe-report's command line: bad input gives one line on stderr and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from eval_sheet_helpers import write_csv

from eval_protocols.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("points", "expected"), [
    (5, "line 3: points 5 > max 2 for task double_pnp"),
    ("", "line 3: missing points"),
])
def test_bad_sheet_gives_one_line_and_exit_2(tmp_path: Path, capsys, points: object, expected: str) -> None:
    sheet = write_csv(tmp_path / "s.csv", [{"policy": "mqe", "task": "double_pnp", "trial": 1, "points": 2},
                                           {"policy": "mqe", "task": "double_pnp", "trial": 2, "points": points}])
    assert main(["summarize", str(sheet), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"mqe-report: error: {sheet}") and expected in err[0]
    assert not (tmp_path / "r").exists(), "no report from a sheet that failed validation"


def test_duplicate_across_two_sheets(tmp_path: Path, capsys) -> None:
    a = write_csv(tmp_path / "a.csv", [{"policy": "mqe", "task": "single_pnp", "trial": 1, "points": 1}])
    b = write_csv(tmp_path / "b.csv", [{"policy": "mqe", "task": "single_pnp", "trial": 1, "points": 0}])
    assert main(["summarize", str(a), str(b), "--out", str(tmp_path / "r")]) == 2
    assert f"{b} line 2: duplicate trial (policy mqe, task single_pnp, trial 1); first at {a} line 2" in (
        capsys.readouterr().err)


def test_sheet_refuses_to_overwrite_and_unknown_task(tmp_path: Path, capsys) -> None:
    args = ["sheet", "--policies", "mqe", "--tasks", "single_pnp", "--out", str(tmp_path)]
    assert main(args) == 0
    assert main(args) == 2
    assert "already exist(s)" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0
    assert main(["sheet", "--policies", "mqe", "--tasks", "pour_water", "--out", str(tmp_path / "x")]) == 2
    assert "unknown task(s) ['pour_water']" in capsys.readouterr().err


def test_lab_task_file_adds_a_task_without_code_changes(tmp_path: Path) -> None:
    (tmp_path / "lab.toml").write_text('[fold_cloth]\ntitle = "Fold Cloth"\nmax_points = 3\ntrials = 10\n'
                                       'description = "Fold the cloth in half twice."\n'
                                       'scoring = "1 point per fold, 1 more if the edges line up."\n')
    sheet = write_csv(tmp_path / "s.csv", [{"policy": "mqe", "task": "fold_cloth", "trial": t, "points": 3}
                                           for t in range(1, 11)])
    assert main(["summarize", str(sheet), "--task-file", str(tmp_path / "lab.toml"), "--out", str(tmp_path / "r"),
                 "--bootstrap-resamples", "200", "--permutation-resamples", "200"]) == 0
    assert "| Fold Cloth | 1.00 ± 0.00 (10/10) |" in (tmp_path / "r/summary.md").read_text()


def test_module_entry_point_help() -> None:
    result = subprocess.run([sys.executable, "-m", "eval_protocols", "summarize", "--help"], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for option in ("--out", "--key", "--reference", "--seed", "--bootstrap-resamples", "--permutation-resamples"):
        assert option in result.stdout
