"""Trial records: `runs/<date>/<policy>/<task>/trial_<n>/` with meta.json, steps.jsonl, goal.png, video.

Written so that a kill -9 at any moment loses nothing already done: meta.json is replaced
atomically (write a temporary file, fsync, rename), each step is one JSON line written and flushed
as it happens (fsync'd periodically, in the background writer's own time), and the video is MJPG
in AVI, whose frames stay decodable without the index a clean close adds.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import json
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from robot_client.camera import Camera

logger = logging.getLogger(__name__)

META = "meta.json"
STEPS = "steps.jsonl"
GOAL = "goal.png"
VIDEO = "video.avi"
VIDEO_TIMESTAMPS = "video_timestamps.csv"
FSYNC_EVERY_S = 2.0  # steps are flushed at once (enough for a killed process); fsync'd this often for power loss


def _safe_name(name: str) -> str:
    """A path component from a policy or task name (no separators, no dots-only names)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.+-]", "_", name).strip(".") or "unnamed"
    return cleaned[:100]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace `path` with `data` as JSON so that a reader sees the old or the new file, never half."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True, default=_json_default)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to JSON")


def new_trial_dir(out: Path, policy: str, task: str, date: datetime.date | None = None) -> tuple[Path, int]:
    """Create the next free `trial_<n>` directory (never reusing one) and return it with n."""
    date = date or datetime.date.today()
    parent = Path(out) / date.isoformat() / _safe_name(policy) / _safe_name(task)
    parent.mkdir(parents=True, exist_ok=True)
    taken = [int(m.group(1)) for p in parent.iterdir() if (m := re.fullmatch(r"trial_(\d+)", p.name))]
    n = max(taken, default=0) + 1
    while True:
        path = parent / f"trial_{n}"
        try:
            path.mkdir()  # exist_ok=False: two clients racing never share a directory
            return path, n
        except FileExistsError:
            n += 1


def image_sha256(image: np.ndarray) -> str:
    """sha256 of an image's shape and pixels (the goal hash in meta.json)."""
    h = hashlib.sha256(str(image.shape).encode())
    h.update(np.ascontiguousarray(image).tobytes())
    return h.hexdigest()


def write_png(path: Path, rgb: np.ndarray) -> None:
    """Save an RGB uint8 image as PNG."""
    import cv2

    if not cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)):
        raise OSError(f"cannot write {path}")


class StepLog:
    """steps.jsonl: one JSON object per line, flushed as written."""

    def __init__(self, path: Path):
        self.path = path
        self._file = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 (lives with the trial)
        self._last_fsync = time.monotonic()
        self.lines = 0

    def write(self, record: dict) -> None:
        """Append one step and flush it to the OS (a killed process loses nothing written)."""
        self._file.write(json.dumps(record, default=_json_default, allow_nan=False) + "\n")
        self._file.flush()
        self.lines += 1
        if time.monotonic() - self._last_fsync > FSYNC_EVERY_S:
            os.fsync(self._file.fileno())
            self._last_fsync = time.monotonic()

    def close(self) -> None:
        """fsync and close."""
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


class VideoRecorder:
    """Writes the camera's newest frame at a steady rate from its own thread, with a timestamp CSV."""

    def __init__(self, camera: Camera, path: Path, fps: float = 10.0):
        self.camera, self.path, self.fps = camera, path, fps
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.frames = 0
        self.late_frames = 0  # writes that started after their slot (the machine was busy)

    def start(self) -> None:
        """Start the writer thread."""
        self._thread = threading.Thread(target=self._run, name="video", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import cv2

        writer = None
        period = 1.0 / self.fps
        with open(self.path.with_name(VIDEO_TIMESTAMPS), "w", newline="", encoding="utf-8") as ts_file:
            stamps = csv.writer(ts_file)
            stamps.writerow(["frame", "unix_time", "monotonic", "frame_age_s"])
            t0 = time.monotonic()
            k = 0
            try:
                while not self._stop.is_set():
                    due = t0 + k * period
                    if self._stop.wait(max(0.0, due - time.monotonic())):
                        break
                    try:
                        rgb, age = self.camera.frame()
                    except Exception:  # no frame yet: keep the slot empty rather than stop recording
                        k += 1
                        continue
                    if writer is None:
                        h, w = rgb.shape[:2]
                        writer = cv2.VideoWriter(str(self.path), cv2.VideoWriter_fourcc(*"MJPG"), self.fps, (w, h))
                    writer.write(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
                    stamps.writerow([self.frames, f"{time.time():.6f}", f"{time.monotonic():.6f}", f"{age:.4f}"])
                    ts_file.flush()
                    self.frames += 1
                    k += 1
                    behind = int((time.monotonic() - t0) / period) - k
                    if behind > 0:  # skip missed slots instead of bursting: the rate stays steady
                        self.late_frames += behind
                        k += behind
            finally:
                if writer is not None:
                    writer.release()

    def stop(self) -> None:
        """Stop and close the video file."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)


class TrialRecord:
    """The files of one trial; `meta` is rewritten atomically whenever it changes."""

    def __init__(self, directory: Path, trial: int, meta: dict):
        self.dir, self.trial = directory, trial
        self.meta = dict(meta)
        self.meta.setdefault("status", "running")
        self.meta["trial"] = trial
        self.meta["started_at"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        self.steps = StepLog(directory / STEPS)
        self.video: VideoRecorder | None = None
        self.save_meta()

    def save_meta(self) -> None:
        """Write meta.json atomically."""
        write_json_atomic(self.dir / META, self.meta)

    def save_goal(self, rgb: np.ndarray) -> str:
        """goal.png and its hash in meta.json; returns the hash."""
        write_png(self.dir / GOAL, rgb)
        digest = image_sha256(rgb)
        self.meta["goal_sha256"] = digest
        self.save_meta()
        return digest

    def start_video(self, camera: Camera, fps: float) -> None:
        """Record the camera at a steady `fps` until finish()."""
        self.video = VideoRecorder(camera, self.dir / VIDEO, fps)
        self.video.start()

    def finish(self, **fields: Any) -> None:
        """Close the step log and video, and write the outcome into meta.json."""
        self.steps.close()
        if self.video is not None:
            self.video.stop()
            fields.setdefault("video_frames", self.video.frames)
            fields.setdefault("video_late_frames", self.video.late_frames)
        self.meta.update(fields)
        self.meta["ended_at"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        self.save_meta()


def read_steps(path: Path) -> list[dict]:
    """Every complete line of a steps.jsonl; a torn last line (a kill mid-write) is skipped."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    records = []
    for i, line in enumerate(lines):
        if not line:
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:  # only the last, unterminated line may be torn
                logger.warning("%s: last line is incomplete (interrupted write); skipped", path)
                break
            raise ValueError(f"{path} line {i + 1} is not valid JSON") from None
    return records
