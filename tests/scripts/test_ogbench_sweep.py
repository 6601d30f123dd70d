"""scripts/ogbench_sweep.sh on a tiny dataset: probe, plan, detached runs, rows (needs `ogbench`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ogbench", reason="the sweep generates OGBench data: pip install ogbench")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ogbench_sweep.sh"
DATASET = "pointmaze-medium-navigate-v0"


def sweep_env() -> dict[str, str]:
    return {**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu", "AGENTS": "gcbc", "SEEDS": "2",
            "PRESET": "tiny", "PROBE_SECONDS": "2", "MIN_STEPS": "20", "EVAL_WORKERS": "1",
            "EXTRA_DATA_ARGS": "--episodes 3 --length 50", "EXTRA_REPRO_ARGS": "--eval-episodes 1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(SCRIPT.parents[1]), os.environ.get("PYTHONPATH")]))}


def test_sweep_plans_from_the_probe_and_writes_rows(tmp_path):
    work = tmp_path / "sweep"
    result = subprocess.run(["bash", str(SCRIPT), str(work), f"{DATASET}:0:1:3"], env=sweep_env(),
                            cwd=SCRIPT.parents[1], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    plan = json.loads((work / "plan.json").read_text())
    rate = plan["probe_updates_per_s"]["gcbc"]
    assert rate > 0
    (row,) = plan["rows"]
    # 0.8 x rate x 1 s, rounded down to a multiple of 20, at least 20; evaluations in the last 3 tenths.
    assert row["steps"] == max(20, int(0.8 * rate) // 20 * 20)
    assert row["eval_every"] == row["steps"] // 10
    assert row["eval_start"] == row["steps"] - 2 * row["eval_every"]
    done = work / "done" / f"{DATASET}-gcbc"
    deadline = time.monotonic() + 240  # the run is detached from the script: wait for its marker
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(1)
    assert done.read_text().strip() == "0", (work / "logs" / f"{DATASET}-gcbc.log").read_text()[-2000:]
    out = json.loads((work / "runs" / DATASET / "gcbc.json").read_text())
    assert out["steps"] == row["steps"] and out["seeds"] == [0, 1] and out["vmap_seeds"]
    assert [e["step"] for e in out["runs"][0]["evaluations"]] == [
        row["eval_start"], row["eval_start"] + row["eval_every"], row["steps"]]


def test_malformed_entry_is_one_line_and_exit_2(tmp_path):
    result = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "w"), f"{DATASET}:gpu0:100:3"], env=sweep_env(),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "expected DATASET:GPU:SECONDS:EVALS" in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "w").exists()
