"""mqe-robot's command line: bad input is one line and exit code 2; capture-goal; operator prompts."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from client_helpers import free_port

from robot_client import operator, run

REPO = Path(__file__).resolve().parents[2]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("mqe-robot: error:")]
    assert len(errors) == 1 and "Traceback" not in "\n".join(err), err
    return errors[0]


@pytest.fixture
def goal_png(tmp_path) -> Path:
    import cv2
    import numpy as np

    path = tmp_path / "goal.png"
    cv2.imwrite(str(path), np.full((48, 64, 3), 100, np.uint8))
    return path


def test_missing_goal_file(tmp_path, capsys, mock_server):
    rc = run.main(["--task", "single_pnp", "--goal", str(tmp_path / "nope.png"), "--out", str(tmp_path)])
    assert rc == 2 and "nope.png not found" in one_error_line(capsys)


def test_unreadable_goal_image(tmp_path, capsys):
    bad = tmp_path / "goal.png"
    bad.write_bytes(b"not an image")
    rc = run.main(["--task", "single_pnp", "--goal", str(bad), "--out", str(tmp_path)])
    assert rc == 2 and "cannot be read" in one_error_line(capsys)


def test_unknown_task(tmp_path, capsys):
    rc = run.main(["--task", "single_pnpp", "--out", str(tmp_path)])
    assert rc == 2 and "unknown task 'single_pnpp'" in one_error_line(capsys)


def test_server_unreachable_at_start(tmp_path, capsys):
    rc = run.main(["--task", "single_pnp", "--server", f"http://127.0.0.1:{free_port()}", "--out", str(tmp_path)])
    assert rc == 2 and "unreachable" in one_error_line(capsys)


@pytest.mark.parametrize(("args", "message"), [
    (("--image-size", "0"), "refusing to move the robot: policy 'mock' is state-based"),
    (("--schema-version", "2"), "refusing to move the robot: server speaks protocol version 2"),
    (("--action-dim", "6"), "refusing to move the robot: policy 'mock' has action_dim 6"),
])
def test_metadata_mismatch_refuses_to_move(tmp_path, capsys, mock_server, args, message):
    server = mock_server(*args)
    rc = run.main(["--task", "single_pnp", "--server", server.url, "--out", str(tmp_path), "--no-prompt"])
    assert rc == 2 and message in one_error_line(capsys)
    assert not (tmp_path / "runs").exists()


def test_wrong_token_is_one_line(tmp_path, capsys, mock_server):
    server = mock_server("--token", "right")
    rc = run.main(["--task", "single_pnp", "--server", server.url, "--token", "wrong", "--out", str(tmp_path)])
    assert rc == 2 and "unauthorized" in one_error_line(capsys)


def test_widowx_without_interbotix_is_one_line(tmp_path, capsys, mock_server, goal_png):
    server = mock_server()
    rc = run.main(["--task", "single_pnp", "--robot", "widowx", "--camera", "0", "--goal", str(goal_png),
                   "--server", server.url, "--out", str(tmp_path), "--no-prompt"])
    assert rc == 2 and "interbotix_xs_modules not found" in one_error_line(capsys)


@pytest.mark.parametrize(("args", "message"), [
    (["--robot", "widowx"], "needs --camera"),
    (["--robot", "widowx", "--camera", "0"], "needs --goal"),
    (["--hz", "0"], "--hz 0.0 must be in"),
    (["--request-timeout-s", "0.3"], "shorter than one period"),
    (["--max-steps", "0"], "--max-steps 0"),
    (["--server", "localhost:8000"], "must be a URL"),
    (["--robot", "widowx", "--camera", "0", "--goal", "g.png", "--pace", "lockstep"],
     "is for --robot sim only; drop --pace lockstep"),
    (["--pace", "lockstep", "--request-timeout-s", "500"], "must be in (0, 120] s with --pace lockstep"),
    (["--pace", "unpaced"], "unpaced"),
    (["--robot", "widowx", "--camera", "0", "--goal", "g.png", "--robot-model", "px100"],
     "--robot widowx: robot model 'px100' has no known reset joints; the client drives wx250s"),
    (["--robot", "widowx", "--camera", "0", "--goal", "g.png", "--reset-time-s", "0.5"],
     "--robot widowx: reset time 0.5 s must be >= 1 s"),
    (["--robot", "widowx", "--camera", "0", "--goal", "g.png", "--effort-limits-ma", "1", "1", "1", "1", "1", "0"],
     "must be 6 positive currents in mA"),
    (["--max-frame-age-s", "0"], "--max-frame-age-s 0.0 must be > 0"),
    (["--action-frame", "absolute"], "absolute"),
])
def test_invalid_combinations_are_refused_at_parse_time(capsys, args, message):
    with pytest.raises(SystemExit) as e:
        run.main(["--task", "single_pnp", *args])
    assert e.value.code == 2
    text = " ".join(capsys.readouterr().err.replace("│", " ").split())  # tyro wraps it in a box
    assert message in text


def test_help_runs_as_a_plain_script():
    out = subprocess.run([sys.executable, str(REPO / "robot_client" / "run.py"), "--help"], capture_output=True,
                         text=True, cwd="/", check=True).stdout
    assert "--max-consecutive-failures" in out and "--dry-run" in out


def test_capture_goal_in_the_twin(tmp_path, capsys):
    pytest.importorskip("mujoco")
    out = tmp_path / "goal.png"
    assert run.main(["capture-goal", "--out", str(out), "--robot", "sim", "--no-prompt"]) == 0
    assert run.load_goal(out).shape == (256, 256, 3)
    assert run.main(["capture-goal", "--out", str(out), "--robot", "sim", "--no-prompt"]) == 2
    assert "exists" in one_error_line(capsys)


def test_points_prompt_validates_and_allows_skipping():
    answers = iter(["three", "5", "-1", "2", "  slipped at the end  "])
    out = io.StringIO()
    assert operator.ask_points(2, "completed", None, read=lambda _: next(answers), out=out) == (2, "slipped at the end")
    assert "not a whole number" in out.getvalue() and "outside 0..2" in out.getvalue()
    answers = iter(["s"])
    out = io.StringIO()
    assert operator.ask_points(1, "aborted", "server lost", read=lambda _: next(answers), out=out) is None
    assert "aborted (server lost)" in out.getvalue()


def test_estop_listener_reacts_to_a_key_on_a_terminal(monkeypatch):
    import os
    import threading
    import time

    master, slave = os.openpty()
    monkeypatch.setattr(sys, "stdin", os.fdopen(slave, "r"))
    stop = threading.Event()
    with operator.estop_listener(stop) as listening:
        assert listening
        os.write(master, b"x")
        time.sleep(0.15)
        assert not stop.is_set()  # other keys do nothing
        os.write(master, b" ")
        assert stop.wait(1.0)
    os.close(master)


def test_estop_listener_is_off_without_a_terminal():
    import threading

    with operator.estop_listener(threading.Event()) as listening:
        assert not listening  # pytest's stdin is not a TTY


def test_show_without_a_display_is_one_line(tmp_path, capsys, mock_server):
    import cv2

    try:
        cv2.namedWindow("probe")
        cv2.destroyWindow("probe")
        pytest.skip("this OpenCV can open windows")
    except cv2.error:
        pass
    server = mock_server()
    rc = run.main(["--task", "single_pnp", "--server", server.url, "--show", "--out", str(tmp_path), "--no-prompt"])
    assert rc == 2 and "--show needs a display" in one_error_line(capsys)


def test_live_view_shows_frame_goal_and_distance_curve(monkeypatch):
    import cv2
    import numpy as np

    from robot_client.show import PANEL, LiveView

    shown = []
    monkeypatch.setattr(cv2, "namedWindow", lambda *a: None)
    monkeypatch.setattr(cv2, "imshow", lambda name, img: shown.append(img))
    monkeypatch.setattr(cv2, "waitKey", lambda ms: -1)
    monkeypatch.setattr(cv2, "destroyWindow", lambda name: None)
    view = LiveView()
    view.start_trial(np.zeros((128, 128, 3), np.uint8))
    for d in (30.0, None, 20.0, 10.0):
        view.update({"distance": d}, np.full((480, 640, 3), 200, np.uint8))
    view.close()
    assert len(shown) == 4 and shown[-1].shape == (PANEL, 3 * PANEL, 3)
    assert (shown[-1][:, 2 * PANEL:] != 255).any()  # the curve was drawn


def test_operator_scores_each_trial_into_the_sheet(tmp_path, mock_server):
    """Prompts on stdin: Enter starts the trial, then points (a bad answer is asked again) and notes."""
    import csv
    import json

    pytest.importorskip("mujoco")
    server = mock_server()
    out = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, str(REPO / "robot_client" / "run.py"), "--task", "double_pnp", "--server", server.url,
         "--max-steps", "3", "--out", str(out), "--operator", "jd"],
        input="\n7\n2\ngood grasp\n", capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "outside 0..2" in proc.stdout
    (sheet,) = out.glob("*/sheet.csv")
    (row,) = list(csv.DictReader(open(sheet)))
    assert (row["policy"], row["task"], row["trial"], row["points"], row["max_points"], row["success"]) == (
        "mock", "double_pnp", "1", "2", "2", "true")
    assert row["operator"] == "jd" and row["notes"] == "good grasp" and len(row["policy_fingerprint"]) == 64
    meta = json.loads((sheet.parent / row["trial_dir"] / "meta.json").read_text())
    assert meta["score"]["points"] == 2 and meta["status"] == "completed"
