"""scripts/ogbench_sweep.sh on a tiny dataset: probe, plan, detached runs, rows (needs `ogbench`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqe_model.ogbench.sweep_plan import evaluation_workers

pytest.importorskip("ogbench", reason="the sweep generates OGBench data: pip install ogbench")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ogbench_sweep.sh"
DATASET = "pointmaze-medium-navigate-v0"


def sweep_env() -> dict[str, str]:
    return {**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu", "AGENTS": "gcbc", "SEEDS": "2",
            "PRESET": "tiny", "PROBE_SECONDS": "2", "MIN_STEPS": "20", "EVAL_WORKERS": "1",
            "EXTRA_DATA_ARGS": "--episodes 3 --length 50", "EXTRA_REPRO_ARGS": "--eval-episodes 1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(SCRIPT.parents[1]), os.environ.get("PYTHONPATH")]))}


def wait_for_row(work, agent) -> dict:
    done = work / "done" / f"{DATASET}-{agent}"
    deadline = time.monotonic() + 240  # the runs are detached from the script: wait for their markers
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(1)
    assert done.read_text().strip() == "0", (work / "logs" / f"{DATASET}-{agent}.log").read_text()[-2000:]
    return json.loads((work / "runs" / DATASET / f"{agent}.json").read_text())


def test_sweep_plans_from_the_probes_and_writes_rows(tmp_path):
    work = tmp_path / "sweep"
    # one dataset (generated once), two entries with their own agents: two probes
    result = subprocess.run(["bash", str(SCRIPT), str(work), f"{DATASET}:0:1:2", f"{DATASET}:0:2:1:gciql"],
                            env=sweep_env(), cwd=SCRIPT.parents[1], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert len(list((work / "data").glob("*.json"))) == 1
    # every dataset has a probe, which waits for it: generation had all the cores (nproc's count)
    assert f"with workers {DATASET}={len(os.sched_getaffinity(0))};" in (work / "logs" / "sweep.log").read_text()
    plan = json.loads((work / "plan.json").read_text())
    rates = plan["probe_updates_per_s"]  # "agent set/agent"
    assert set(rates) == {"gcbc/gcbc", "gciql/gciql"} and min(rates.values()) > 0
    for row, agent, seconds, evals in zip(plan["rows"], ("gcbc", "gciql"), (1, 2), (2, 1), strict=True):
        assert row["agents"] == [agent] and row["gpu"] == 0
        # 0.8 x rate x seconds, rounded down to a multiple of 20, at least 20; the last `evals` tenths.
        assert row["steps"] == max(20, int(0.8 * rates[f"{agent}/{agent}"] * seconds) // 20 * 20)
        assert row["eval_every"] == row["steps"] // 10
        assert row["eval_start"] == row["steps"] - (evals - 1) * row["eval_every"]
        out = wait_for_row(work, agent)
        assert out["steps"] == row["steps"] and out["seeds"] == [0, 1] and out["vmap_seeds"]
        steps = [e["step"] for e in out["runs"][0]["evaluations"]]
        assert steps == list(range(row["eval_start"], row["steps"] + 1, row["eval_every"]))[-evals:]


def test_maze_mqe_runs_leave_their_critic_distances(tmp_path):
    work = tmp_path / "sweep"
    env = sweep_env()
    del env["EVAL_WORKERS"]  # the default: every core the run leaves, as memory allows
    env["STEPS"] = "20"  # no probes
    result = subprocess.run(["bash", str(SCRIPT), str(work), f"{DATASET}:0:1:1:mqe"], env=env,
                            cwd=SCRIPT.parents[1], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    workers = evaluation_workers(len(os.sched_getaffinity(0)), 1)
    assert f"1 run(s) will have {workers} evaluation worker(s) each" in (work / "logs" / "sweep.log").read_text()
    row = wait_for_row(work, "mqe")
    assert row["steps"] == 20 and not list((work / "logs").glob("probe-*"))
    # no probe waits for the data: generation had every core
    assert f"with workers {DATASET}={len(os.sched_getaffinity(0))};" in (work / "logs" / "sweep.log").read_text()
    report = json.loads((work / "runs" / DATASET / "mqe-distances.json").read_text())
    assert report["env"] == DATASET and report["step"] == row["steps"] and report["num_seeds"] == 2
    assert [s["seed"] for s in report["per_seed"]] == [0, 1] and -1 <= report["pooled"]["spearman"] <= 1


@pytest.mark.parametrize("entries, message", [
    ([f"{DATASET}:gpu0:100:3"], "expected DATASET:GPU:SECONDS:EVALS"),
    ([f"{DATASET}:0:100:11"], "EVALS in 1..10"),
    ([f"{DATASET}:0:100:3:mqe+sac"], "agents among mqe, gciql, gcbc"),
    ([f"{DATASET}:0:100:3:mqe", f"{DATASET}:1:100:3:gcbc+mqe"], "with mqe is already in"),
])
def test_malformed_entries_are_one_line_and_exit_2(tmp_path, entries, message):
    result = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "w"), *entries], env=sweep_env(),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert message in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("steps", ["0", "9", "1e5", "many"])
def test_malformed_steps_are_one_line_and_exit_2(tmp_path, steps):
    result = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "w"), f"{DATASET}:0:100:3"],
                            env={**sweep_env(), "STEPS": steps}, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert f"STEPS={steps}: give the updates per run" in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "w").exists()
