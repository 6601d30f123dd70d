"""Trial records: directories never reused, atomic meta.json, torn lines, and a kill -9 mid-trial."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robot_client.records import StepLog, TrialRecord, new_trial_dir, read_steps, write_json_atomic

REPO = Path(__file__).resolve().parents[2]


def test_trial_directories_count_up_and_are_never_reused(tmp_path):
    first, n1 = new_trial_dir(tmp_path, "mqe/v1", "single_pnp")
    second, n2 = new_trial_dir(tmp_path, "mqe/v1", "single_pnp")
    assert (n1, n2) == (1, 2) and first.name == "trial_1" and second.name == "trial_2"
    assert first.parent.name == "single_pnp" and first.parent.parent.name == "mqe_v1"  # no path separators
    (first.parent / "trial_7").mkdir()
    assert new_trial_dir(tmp_path, "mqe/v1", "single_pnp")[1] == 8


def test_meta_is_replaced_atomically(tmp_path):
    path = tmp_path / "meta.json"
    write_json_atomic(path, {"a": 1})
    write_json_atomic(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["meta.json"]  # no temporary file left behind


def test_steps_refuse_nan_and_a_torn_last_line_is_skipped(tmp_path):
    log = StepLog(tmp_path / "steps.jsonl")
    log.write({"step": 0})
    with pytest.raises(ValueError):
        log.write({"step": 1, "distance": float("nan")})  # strict JSON: never write NaN
    log.close()
    with open(tmp_path / "steps.jsonl", "a") as f:
        f.write('{"step": 1, "flags"')
    assert read_steps(tmp_path / "steps.jsonl") == [{"step": 0}]
    (tmp_path / "bad.jsonl").write_text('{"step": 0\n{"step": 1}\n')
    with pytest.raises(ValueError, match="line 1"):
        read_steps(tmp_path / "bad.jsonl")


def test_record_finish_writes_the_outcome(tmp_path):
    record = TrialRecord(tmp_path, 3, {"task": "single_pnp"})
    assert json.loads((tmp_path / "meta.json").read_text())["status"] == "running"
    record.steps.write({"step": 0})
    record.finish(status="aborted", reason="test")
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["status"] == "aborted" and meta["trial"] == 3 and meta["ended_at"]


def test_kill_9_mid_trial_leaves_every_completed_step_readable(tmp_path, mock_server):
    pytest.importorskip("mujoco")
    server = mock_server()
    out = tmp_path / "runs"
    # run.py as a plain script, as an operator may start it
    proc = subprocess.Popen([sys.executable, str(REPO / "robot_client" / "run.py"), "--task", "single_pnp",
                             "--server", server.url, "--no-prompt", "--max-steps", "200", "--out", str(out)],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": ""})
    deadline = time.monotonic() + 30
    steps_file = None
    while time.monotonic() < deadline:
        found = list(out.glob("*/*/single_pnp/trial_1/steps.jsonl"))
        if found and found[0].read_text().count("\n") >= 6:
            steps_file = found[0]
            break
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)
    assert steps_file is not None, "the trial did not start"
    time.sleep(0.37)  # land somewhere inside a period
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    steps = read_steps(steps_file)
    assert len(steps) >= 6 and [s["step"] for s in steps] == list(range(len(steps)))
    meta = json.loads((steps_file.parent / "meta.json").read_text())
    assert meta["status"] == "running" and meta["goal_sha256"]
    assert (steps_file.parent / "goal.png").stat().st_size > 0
