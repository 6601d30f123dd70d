"""`mqe-demo` end to end as a real process: demo server, one lockstep trial on the twin, a report.

This is the path a new user takes first (README quickstart): everything is real (the bundled
checkpoint, `mqe-serve`, `robot_client/run.py`, the twin, `mqe-report`), only the trial is short.
"""

from __future__ import annotations

import csv
import json
import os
import re
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from mqe_model import demo

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("mujoco")


def mqe_demo(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`mqe-demo ARGS` (the console script's function, run as `python -m server.demo`)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu",
           "MQE_SERVE_COMPILATION_CACHE": str(tmp_path / "jax-cache")}
    return subprocess.run([sys.executable, "-m", "server.demo", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_the_console_script_is_this_module():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["mqe-demo"] == "server.demo:main"


def test_demo_serves_runs_a_trial_and_reports(tmp_path):
    step_dir = demo.demo_step_dir()  # a missing demo checkpoint fails here, with how to restore it
    out = tmp_path / "runs"
    result = mqe_demo(tmp_path, "--trials", "1", "--max-steps", "12", "--seed", "4", "--out", str(out))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    text = result.stdout
    printed = dict(re.findall(r"^  (sheet|trials|report): +(.+)$", text, re.MULTILINE))
    assert re.search(r"mqe-demo: done in \d+\.\d s", text), text
    (run,) = out.iterdir()

    sheet = Path(printed["sheet"])
    assert sheet == run / "sheet.csv"
    (row,) = list(csv.DictReader(sheet.open()))
    assert (row["policy"], row["task"], row["trial"], row["max_points"]) == ("demo", "single_pnp", "1", "1")
    assert row["points"] in ("0", "1") and row["notes"].startswith("auto-scored by the twin")

    trial = (sheet.parent / row["trial_dir"]).resolve()
    assert printed["trials"] == f"{trial.parent} (trial_1)"
    meta = json.loads((trial / "meta.json").read_text())
    assert meta["status"] == "completed" and meta["pace"] == "lockstep" and meta["seed"] == 4
    assert meta["policy"]["name"] == "demo" and meta["policy"]["step"] == int(step_dir.name)
    assert meta["policy_fingerprint"] == row["policy_fingerprint"]
    assert meta["score"]["points"] == int(row["points"]) and meta["counters"]["holds"] == 0
    steps = [json.loads(line) for line in (trial / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == 12 and all(isinstance(s["distance"], float) for s in steps)
    assert (trial / "goal.png").stat().st_size > 0

    report = Path(printed["report"])
    assert report == run / "report" / "summary.md" and "Single PnP" in report.read_text()
    cell = json.loads((report.parent / "summary.json").read_text())["demo"]["single_pnp"]
    assert cell["points"] == [int(row["points"])] and cell["policy_fingerprints"] == [row["policy_fingerprint"]]

    # the server was stopped: its port no longer answers, and it logged a clean shutdown
    url = re.search(r"serving the bundled demo policy on (http://\S+)", text).group(1)
    port = int(url.rsplit(":", 1)[1])
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
    log = (run / "server.log").read_text()
    assert "serving the bundled demo policy as 'demo'" in log and "open at shutdown" in log


@pytest.mark.parametrize(("args", "message"), [
    (["--task", "single_pnpp"], "mqe-demo: error: --task 'single_pnpp': the twin has single_pnp, "),
    (["--trials", "0"], "--trials 0 must be >= 1"),
    (["--policy", "mqe"], "--policy 'mqe': expected NAME=CHECKPOINT_DIR"),
    (["--policy", "mqe=/no/such/run"], "--policy mqe=/no/such/run: /no/such/run does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    result = mqe_demo(tmp_path, *args, "--out", str(tmp_path / "runs"), timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert message in " ".join(result.stderr.replace("│", " ").split())  # tyro boxes parse errors
    assert not (tmp_path / "runs").exists()


def test_given_policies_each_run_the_task_on_the_same_scenes(tmp_path):
    step_dir = demo.demo_step_dir()
    out = tmp_path / "runs"
    result = mqe_demo(tmp_path, "--policy", f"first={step_dir}", "--policy", f"second={step_dir}",
                      "--task", "open_drawer", "--trials", "2", "--max-steps", "3", "--out", str(out))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "serving first=" in result.stdout
    (run,) = out.iterdir()
    rows = list(csv.DictReader((run / "sheet.csv").open()))
    assert [(r["policy"], r["task"], r["trial"]) for r in rows] == [
        ("first", "open_drawer", "1"), ("first", "open_drawer", "2"),
        ("second", "open_drawer", "1"), ("second", "open_drawer", "2")]
    # the same weights on the same scene seeds act identically, so their trials score alike
    assert [r["points"] for r in rows[:2]] == [r["points"] for r in rows[2:]]
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert set(summary) >= {"first", "second"}
