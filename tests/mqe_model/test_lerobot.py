"""LeRobotDataset v2.1 and v3.0: written, read back exactly, laid out as the format says, and trial
records exported through `mqe-export-lerobot`."""

from __future__ import annotations

import csv
import json

import cv2
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lerobot_helpers import record_trial, synthetic_episodes, write_dataset

from mqe_model.data import lerobot, lerobot_export
from mqe_model.data.dataset import DatasetError
from mqe_model.data.prepare import prepare


@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
def test_lossless_round_trip_is_exact(tmp_path, version):
    episodes = synthetic_episodes()
    root = write_dataset(tmp_path / "ds", episodes, version)
    data = lerobot.load_lerobot(root, cache_dir=tmp_path / "c")
    np.testing.assert_array_equal(data.observations, np.concatenate([e.frames for e in episodes]))
    np.testing.assert_array_equal(data.actions, np.concatenate([e.actions for e in episodes]))
    np.testing.assert_array_equal(data.proprio, np.concatenate([e.state for e in episodes]))
    assert list(np.flatnonzero(data.terminals)) == [5, 12, 20]
    assert isinstance(data.observations, np.memmap)


def test_v3_layout_follows_the_format(tmp_path):
    episodes = synthetic_episodes()
    root = write_dataset(tmp_path / "ds", episodes, "v3.0", codec="h264")
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 5 and info["total_frames"] == 21
    assert info["features"][lerobot_export.CAMERA]["info"]["video.codec"] == "h264"
    rows = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    key = f"videos/{lerobot_export.CAMERA}"
    assert [(r["dataset_from_index"], r["dataset_to_index"]) for r in rows] == [(0, 6), (6, 13), (13, 21)]
    assert [(r[f"{key}/from_timestamp"], r[f"{key}/to_timestamp"]) for r in rows] == [(0, 1.2), (1.2, 2.6), (2.6, 4.2)]
    assert rows[1]["tasks"] == ["open_drawer"] and rows[0]["stats/action/count"] == [6]
    np.testing.assert_allclose(rows[2]["stats/action/mean"], episodes[2].actions.mean(0), rtol=1e-6)
    tasks = pd.read_parquet(root / "meta/tasks.parquet")
    assert tasks.index.name == "task" and tasks.loc["open_drawer", "task_index"] == 1
    data = pq.read_table(root / "data/chunk-000/file-000.parquet")
    action_type = data.schema.field("action").type  # datasets' Sequence(Value("float32"), length=7)
    assert pa.types.is_fixed_size_list(action_type) and action_type.list_size == 7
    assert action_type.value_type == pa.float32()
    assert data["index"].to_pylist() == list(range(21))
    stats = json.loads((root / "meta/stats.json").read_text())
    assert np.asarray(stats[lerobot_export.CAMERA]["mean"]).shape == (3, 1, 1)
    np.testing.assert_allclose(stats["action"]["max"], np.concatenate([e.actions for e in episodes]).max(0), rtol=1e-6)
    # H.264 in yuv420p is lossy: frames come back close, actions exactly
    back = lerobot.load_lerobot(root, cache_dir=tmp_path / "c")
    np.testing.assert_array_equal(back.actions, np.concatenate([e.actions for e in episodes]))
    assert back.observations.shape == (21, 16, 24, 3)


def test_prepare_reads_the_dataset_for_training(tmp_path):
    root = write_dataset(tmp_path / "ds", synthetic_episodes(length=8, height=16, width=16), "v3.0")
    data = prepare(root, image_size=8, cache_dir=tmp_path / "c")
    assert data.info["format"] == "lerobot" and data.info["control_hz"] == 5.0
    assert data.info["action_names"] == lerobot_export.ACTION_NAMES and data.action_frame == "measured"
    assert data.action_stats.scheme == "bounds_q99" and data.dataset.observations.shape == (27, 8, 8, 3)
    with pytest.raises(DatasetError, match="no image or video feature 'wrist'; choose one of"):
        prepare(root, camera="wrist", cache_dir=tmp_path / "c")
    info = json.loads((root / "meta/info.json").read_text())
    (root / "meta/info.json").write_text(json.dumps({**info, "codebase_version": "v1.6"}))
    with pytest.raises(DatasetError, match="codebase_version 'v1.6'"):
        prepare(root, cache_dir=tmp_path / "c")


def _nearest_avi_frames(trial, steps):
    with open(trial / "video_timestamps.csv", newline="") as f:
        times = np.array([float(r["unix_time"]) for r in csv.DictReader(f)])
    capture, frames = cv2.VideoCapture(str(trial / "video.avi")), []
    while (frame := capture.read())[0]:
        frames.append(frame[1][..., ::-1])
    return np.stack([frames[int(np.abs(times[: len(frames)] - s["unix_time"]).argmin())] for s in steps])


def test_trial_records_export_as_lerobot_v3(tmp_path, capsys):
    from robot_client.records import read_steps

    trials = [record_trial(tmp_path / "runs", task, steps, seed)
              for task, steps, seed in (("single_pnp", 5, 0), ("open_drawer", 4, 1))]
    record_trial(tmp_path / "runs", "single_pnp", 1, 2)  # one step: no transition, skipped
    out = tmp_path / "export"
    assert lerobot_export.main([str(tmp_path / "runs"), "--out", str(out), "--codec", "lossless"]) == 0
    assert "2 episodes, 9 frames at 5 fps" in capsys.readouterr().out
    data = lerobot.load_lerobot(out, cache_dir=tmp_path / "c")
    start = 0
    for trial in sorted(trials):  # the exporter's order: by path
        steps = read_steps(trial / "steps.jsonl")
        got = data.actions[start : start + len(steps)]
        for t, step in enumerate(steps):
            expected = step.get("executed_action") or [0.0] * 6 + [steps[t - 1]["executed_action"][6]]
            np.testing.assert_array_equal(got[t], np.float32(expected))
        np.testing.assert_array_equal(data.proprio[start : start + len(steps)], np.float32([s["ee_xyz"] for s in steps]))
        np.testing.assert_array_equal(data.observations[start : start + len(steps)], _nearest_avi_frames(trial, steps))
        start += len(steps)
    tasks = pd.read_parquet(out / "meta/tasks.parquet")
    assert sorted(tasks.index) == ["open_drawer", "single_pnp"]


def test_export_bad_input_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert lerobot_export.main([str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == (f"mqe-export-lerobot: error: {tmp_path / 'empty'}: no trial records "
                                               "(meta.json + steps.jsonl) below it")
    record_trial(tmp_path / "runs", "single_pnp", 3, 0)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("")
    assert lerobot_export.main([str(tmp_path / "runs"), "--out", str(tmp_path / "taken")]) == 2
    assert "not empty; choose a new --out" in capsys.readouterr().err
