"""Tiny LeRobotDatasets written by the exporter's writer, and trial records written by robot_client's own recorder."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from mqe_model.data.lerobot_export import Episode, LeRobotWriter


def synthetic_episodes(count: int = 3, length: int = 6, height: int = 16, width: int = 24,
                       seed: int = 0) -> list[Episode]:
    """Episodes of random frames, actions and states (the tasks alternate between two names)."""
    rng = np.random.default_rng(seed)
    return [Episode(frames=rng.integers(0, 256, (length + i, height, width, 3), dtype=np.uint8),
                    actions=rng.normal(size=(length + i, 7)).astype(np.float32),
                    state=rng.normal(size=(length + i, 3)).astype(np.float32),
                    task=("single_pnp", "open_drawer")[i % 2]) for i in range(count)]


def write_dataset(root: Path, episodes: list[Episode], version: str = "v3.0", codec: str = "lossless",
                  fps: float = 5.0) -> Path:
    writer = LeRobotWriter(root, fps, version, codec)
    for episode in episodes:
        writer.add(episode)
    return writer.finish()


class ScriptedCamera:
    """A camera whose frame is a flat colour that changes every 20 ms (robot_client.camera.Camera's interface)."""

    def __init__(self, height: int = 24, width: int = 32):
        self.shape, self.start = (height, width, 3), time.monotonic()

    def frame(self) -> tuple[np.ndarray, float]:
        tick = int((time.monotonic() - self.start) / 0.02)
        return np.full(self.shape, (tick * 7) % 256, np.uint8), 0.0


def record_trial(out: Path, task: str, steps: int, seed: int, hz: float = 5.0) -> Path:
    """One trial written by robot_client.records (meta.json, steps.jsonl, goal.png, MJPG video) with a
    held step in the middle, as the control loop writes them."""
    from robot_client.records import TrialRecord, new_trial_dir

    rng = np.random.default_rng(seed)
    directory, n = new_trial_dir(out, "mqe", task)
    record = TrialRecord(directory, n, {"task": task, "hz": hz, "policy": {"name": "mqe"}})
    record.save_goal(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8))
    record.start_video(ScriptedCamera(), fps=25.0)
    time.sleep(0.1)
    for step in range(steps):
        rec = {"step": step, "t": step / hz, "unix_time": round(time.time(), 4),
               "ee_xyz": rng.normal(size=3).round(5).tolist(), "flags": {}}
        if step == 2:
            rec["flags"] = {"held": True}
        else:
            rec["executed_action"] = rng.normal(scale=0.01, size=7).round(6).tolist()
            rec["executed_action"][6] = float(step % 2)
        record.steps.write(rec)
        time.sleep(0.05)
    time.sleep(0.1)
    record.finish(status="completed")
    return directory
