"""`mqe-export-lerobot`: trial records (robot_client/records.py) as a LeRobotDataset (v3.0, or v2.1).

    mqe-export-lerobot runs/2026-11-30 --out exports/widowx-trials          # every trial below the folder
    mqe-export-lerobot runs --out exports/t --codec lossless --version v2.1

One trial is one episode at the trial's control rate (`hz` in meta.json): frame t is the frame of
the trial video (video.avi, with video_timestamps.csv) nearest in time to step t, the action the
7-d `executed_action` (dx, dy, dz, droll, dpitch, dyaw, gripper; a held step has zero movement and
the last gripper command), `observation.state` the end-effector position `ee_xyz`, the task the
trial's task. Actions are deltas from the measured pose (`action_frame` "measured", in the
action feature's `info`). Videos are AV1 (LeRobot's default), H.264, or lossless H.264 RGB; stats
(min, max, mean, std, count; images per channel on [0, 1]) are written per episode and in total.
"""

from __future__ import annotations

import csv
import dataclasses
import fractions
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import tyro

from mqe_client.images import preprocess_images
from mqe_model.data.dataset import DatasetError

logger = logging.getLogger(__name__)

CODECS = {  # name -> (PyAV encoder, pixel format, options, info.json's video.codec)
    "av1": ("libsvtav1", "yuv420p", {"crf": "30", "g": "2"}, "av1"),
    "h264": ("libx264", "yuv420p", {"crf": "18", "g": "2"}, "h264"),
    "lossless": ("libx264rgb", "rgb24", {"qp": "0"}, "h264"),
}
CAMERA = "observation.images.image"
ACTION_NAMES = ["dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper"]
CHUNKS_SIZE = 1000


@dataclasses.dataclass(frozen=True)
class Episode:
    """One episode to write."""

    frames: np.ndarray  # (T, H, W, 3) uint8 RGB
    actions: np.ndarray  # (T, 7) float32
    state: np.ndarray  # (T, 3) float32, end-effector xyz (m)
    task: str  # the task's name


# ----------------------------------------------------------------------------- trial records


def _video_frames(trial: Path) -> tuple[np.ndarray, list[np.ndarray]]:
    """(unix time of each frame, the frames RGB) of a trial's video.avi."""
    import cv2

    with open(trial / "video_timestamps.csv", newline="", encoding="utf-8") as f:
        times = np.array([float(row["unix_time"]) for row in csv.DictReader(f)])
    capture = cv2.VideoCapture(str(trial / "video.avi"))
    frames = []
    while len(frames) < len(times):
        ok, bgr = capture.read()
        if not ok:
            break
        frames.append(bgr[..., ::-1])
    capture.release()
    return times[: len(frames)], frames


def trial_episode(trial: Path, image_size: int | None = None) -> tuple[Episode, float] | None:
    """A trial directory as (Episode, control rate in Hz); None (with the reason logged) if unusable."""
    from robot_client.records import read_steps

    meta = json.loads((trial / "meta.json").read_text())
    steps = [s for s in read_steps(trial / "steps.jsonl") if "unix_time" in s and "ee_xyz" in s]
    if len(steps) < 2:
        logger.warning("%s: %d recorded step(s); skipped (an episode needs 2)", trial, len(steps))
        return None
    if not (trial / "video.avi").exists() or not (trial / "video_timestamps.csv").exists():
        logger.warning("%s: no video.avi and video_timestamps.csv; skipped", trial)
        return None
    times, frames = _video_frames(trial)
    if not frames:
        logger.warning("%s: the video holds no frame; skipped", trial)
        return None
    step_times = np.array([s["unix_time"] for s in steps])
    nearest = np.abs(times[None, :] - step_times[:, None]).argmin(axis=1)
    images = np.stack([frames[i] for i in nearest])
    if image_size:
        images = preprocess_images(images, image_size, image_size)
    actions, gripper = np.zeros((len(steps), 7), np.float32), 1.0
    for t, step in enumerate(steps):
        executed = step.get("executed_action")
        if executed is not None:
            actions[t] = executed
            gripper = float(executed[6])
        else:
            actions[t, 6] = gripper  # held: the arm stays, the gripper keeps its last command
    state = np.asarray([s["ee_xyz"] for s in steps], np.float32)
    return Episode(images, actions, state, str(meta.get("task", "unknown"))), float(meta.get("hz", 5.0))


def find_trials(root: Path) -> list[Path]:
    """Every trial directory (holding meta.json and steps.jsonl) at or below `root`, in name order."""
    return sorted(p.parent for p in root.rglob("steps.jsonl") if (p.parent / "meta.json").exists())


# ----------------------------------------------------------------------------- statistics


class _Stats:
    """Running min, max, mean, std and count of one feature (images: per channel, on [0, 1])."""

    def __init__(self) -> None:
        self.count, self.total, self.squares, self.low, self.high = 0, 0.0, 0.0, None, None
        self.frames = 0  # frames seen (count is values: frames times pixels for images)

    def add(self, values: np.ndarray, image: bool) -> dict[str, Any]:
        x = values.astype(np.float64)
        if image:  # (T, H, W, 3) -> one value per channel, LeRobot's (3, 1, 1)
            x = x.reshape(-1, 3) / 255.0
        stats = {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "std": x.std(0), "count": [len(values)]}
        self.count += len(x)
        self.total = self.total + x.sum(0)
        self.squares = self.squares + (x * x).sum(0)
        self.low = stats["min"] if self.low is None else np.minimum(self.low, stats["min"])
        self.high = stats["max"] if self.high is None else np.maximum(self.high, stats["max"])
        self.frames += len(values)
        return _listed(stats, image)

    def summary(self, image: bool) -> dict[str, Any]:
        mean = self.total / self.count
        std = np.sqrt(np.maximum(self.squares / self.count - mean * mean, 0.0))
        return _listed({"min": self.low, "max": self.high, "mean": mean, "std": std, "count": [self.frames]}, image)


def _listed(stats: dict[str, Any], image: bool) -> dict[str, Any]:
    shape = (lambda v: np.asarray(v).reshape(3, 1, 1).tolist()) if image else (lambda v: np.asarray(v).tolist())
    return {k: (v if k == "count" else shape(v)) for k, v in stats.items()}


# ----------------------------------------------------------------------------- the writer


class LeRobotWriter:
    """Writes episodes one at a time (one in memory) as a LeRobotDataset v3.0 or v2.1."""

    def __init__(self, root: Path, fps: float, version: Literal["v3.0", "v2.1"] = "v3.0",
                 codec: str = "av1", robot_type: str = "widowx"):
        if root.exists() and any(root.iterdir()):
            raise DatasetError(f"{root}: not empty; choose a new --out")
        if codec not in CODECS:
            raise DatasetError(f"codec {codec!r}: choose one of {sorted(CODECS)}")
        self.root, self.fps, self.version, self.codec, self.robot_type = root, fps, version, codec, robot_type
        self.episodes: list[dict[str, Any]] = []
        self.tasks: dict[str, int] = {}
        self.frames = 0
        self.shape: tuple[int, ...] | None = None
        self.stats = {k: _Stats() for k in (CAMERA, "observation.state", "action")}
        self._parquet = None  # v3: one data file and one video, episodes back to back
        self._video = None

    def _open_video(self, path: Path, height: int, width: int):
        import av

        encoder, pix_fmt, options, _ = CODECS[self.codec]
        os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its whole configuration at info level
        if pix_fmt == "yuv420p" and (height % 2 or width % 2):
            raise DatasetError(f"{self.codec} video needs even sizes, the frames are {width} x {height}; "
                               "pass an even --image-size or --codec lossless")
        path.parent.mkdir(parents=True, exist_ok=True)
        container = av.open(str(path), "w")
        stream = container.add_stream(encoder, rate=fractions.Fraction(self.fps).limit_denominator(1000),
                                      options=options)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.time_base = 1 / fractions.Fraction(self.fps).limit_denominator(1000)
        return container, stream, [0]

    def _encode(self, video, frames: np.ndarray) -> None:
        import av

        container, stream, next_pts = video
        for frame in frames:
            packet_frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
            packet_frame.pts = next_pts[0]
            next_pts[0] += 1
            for packet in stream.encode(packet_frame):
                container.mux(packet)

    @staticmethod
    def _close_video(video) -> None:
        container, stream, _ = video
        for packet in stream.encode():
            container.mux(packet)
        container.close()

    def _table(self, episode: Episode, index: int, task_index: int):
        import pyarrow as pa

        length = len(episode.actions)
        def vectors(x: np.ndarray):  # LeRobot's Sequence(length=n): fixed-size lists
            return pa.FixedSizeListArray.from_arrays(pa.array(x.astype(np.float32).ravel()),
                                                     type=pa.list_(pa.field("item", pa.float32()), x.shape[1]))
        return pa.table({
            "observation.state": vectors(episode.state),
            "action": vectors(episode.actions),
            "timestamp": pa.array(np.arange(length, dtype=np.float32) / np.float32(self.fps)),
            "frame_index": pa.array(np.arange(length, dtype=np.int64)),
            "episode_index": pa.array(np.full(length, index, np.int64)),
            "index": pa.array(np.arange(self.frames, self.frames + length, dtype=np.int64)),
            "task_index": pa.array(np.full(length, task_index, np.int64)),
        })

    def add(self, episode: Episode) -> None:
        """Append one episode."""
        import pyarrow.parquet as pq

        if self.shape is None:
            self.shape = episode.frames.shape[1:]
        elif episode.frames.shape[1:] != self.shape:
            raise DatasetError(f"episode {len(self.episodes)} has frames {episode.frames.shape[1:]}, the first "
                               f"had {self.shape}; pass --image-size to bring them to one size")
        index, length = len(self.episodes), len(episode.actions)
        task_index = self.tasks.setdefault(episode.task, len(self.tasks))
        table = self._table(episode, index, task_index)
        height, width = self.shape[:2]
        row: dict[str, Any] = {"episode_index": index, "tasks": [episode.task], "length": length}
        if self.version == "v2.1":
            chunk = index // CHUNKS_SIZE
            path = self.root / f"data/chunk-{chunk:03d}/episode_{index:06d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, path)
            video = self._open_video(self.root / f"videos/chunk-{chunk:03d}/{CAMERA}/episode_{index:06d}.mp4",
                                     height, width)
            self._encode(video, episode.frames)
            self._close_video(video)
        else:
            if self._parquet is None:
                path = self.root / "data/chunk-000/file-000.parquet"
                path.parent.mkdir(parents=True, exist_ok=True)
                self._parquet = pq.ParquetWriter(path, table.schema)
                self._video = self._open_video(self.root / f"videos/{CAMERA}/chunk-000/file-000.mp4", height, width)
            self._parquet.write_table(table)
            start = self._video[2][0]
            self._encode(self._video, episode.frames)
            row.update({"data/chunk_index": 0, "data/file_index": 0, "dataset_from_index": self.frames,
                        "dataset_to_index": self.frames + length, f"videos/{CAMERA}/chunk_index": 0,
                        f"videos/{CAMERA}/file_index": 0, f"videos/{CAMERA}/from_timestamp": start / self.fps,
                        f"videos/{CAMERA}/to_timestamp": (start + length) / self.fps,
                        "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
        row["stats"] = {CAMERA: self.stats[CAMERA].add(episode.frames, image=True),
                        "observation.state": self.stats["observation.state"].add(episode.state, image=False),
                        "action": self.stats["action"].add(episode.actions, image=False)}
        self.episodes.append(row)
        self.frames += length

    def finish(self) -> Path:
        """Close the files and write the metadata; returns the dataset root."""
        import pandas as pd
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self.episodes:
            raise DatasetError("no trial had 2 or more steps and a video: nothing to export")
        if self._parquet is not None:
            self._parquet.close()
            self._close_video(self._video)
        meta = self.root / "meta"
        meta.mkdir(parents=True, exist_ok=True)
        tasks = sorted(self.tasks.items(), key=lambda kv: kv[1])
        if self.version == "v2.1":
            _jsonl(meta / "episodes.jsonl", [{k: v for k, v in e.items() if k != "stats"} for e in self.episodes])
            _jsonl(meta / "episodes_stats.jsonl", [{"episode_index": e["episode_index"], "stats": e["stats"]}
                                                   for e in self.episodes])
            _jsonl(meta / "tasks.jsonl", [{"task_index": i, "task": t} for t, i in tasks])
        else:
            rows = []
            for e in self.episodes:
                flat = {k: v for k, v in e.items() if k != "stats"}
                for feature, stats in e["stats"].items():
                    flat.update({f"stats/{feature}/{name}": value for name, value in stats.items()})
                rows.append(flat)
            (meta / "episodes/chunk-000").mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(rows), meta / "episodes/chunk-000/file-000.parquet")
            frame = pd.DataFrame({"task_index": [i for _, i in tasks]}, index=pd.Index([t for t, _ in tasks], name="task"))
            frame.to_parquet(meta / "tasks.parquet")
            (meta / "stats.json").write_text(json.dumps(
                {k: s.summary(image=k == CAMERA) for k, s in self.stats.items()}, indent=2))
        (meta / "info.json").write_text(json.dumps(self._info(), indent=4))
        return self.root

    def _info(self) -> dict[str, Any]:
        height, width = self.shape[:2]
        video_info = {"video.fps": self.fps, "video.height": height, "video.width": width, "video.channels": 3,
                      "video.codec": CODECS[self.codec][3], "video.pix_fmt": CODECS[self.codec][1],
                      "video.is_depth_map": False, "has_audio": False}
        scalar = lambda dtype: {"dtype": dtype, "shape": [1], "names": None}  # noqa: E731
        v2 = self.version == "v2.1"
        info = {
            "codebase_version": self.version, "robot_type": self.robot_type,
            "fps": int(self.fps) if float(self.fps).is_integer() else self.fps,
            "total_episodes": len(self.episodes), "total_frames": self.frames, "total_tasks": len(self.tasks),
            "chunks_size": CHUNKS_SIZE, "splits": {"train": f"0:{len(self.episodes)}"},
            "data_path": ("data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet" if v2
                          else "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"),
            "video_path": ("videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4" if v2
                           else "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"),
            "features": {
                CAMERA: {"dtype": "video", "shape": [height, width, 3], "names": ["height", "width", "channels"],
                         "info": video_info},
                "observation.state": {"dtype": "float32", "shape": [3], "names": ["x", "y", "z"]},
                "action": {"dtype": "float32", "shape": [7], "names": ACTION_NAMES,
                           "info": {"action_frame": "measured"}},
                "timestamp": scalar("float32"), "frame_index": scalar("int64"),
                "episode_index": scalar("int64"), "index": scalar("int64"), "task_index": scalar("int64"),
            },
        }
        if v2:
            info.update({"total_chunks": len(self.episodes) // CHUNKS_SIZE + 1, "total_videos": len(self.episodes)})
        else:
            info.update({"data_files_size_in_mb": 100, "video_files_size_in_mb": 200})
        return info


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def export_trials(trials: list[Path], out: Path, version: Literal["v3.0", "v2.1"] = "v3.0",
                  codec: str = "av1", image_size: int | None = None) -> Path:
    """Write `trials` as one LeRobotDataset at `out`."""
    episodes: Iterator[tuple[Episode, float]] = (e for e in (trial_episode(t, image_size) for t in trials) if e)
    writer = None
    for episode, hz in episodes:
        if writer is None:
            writer = LeRobotWriter(out, hz, version, codec)
        elif abs(hz - writer.fps) > 1e-9:
            raise DatasetError(f"trials at {hz:g} Hz and {writer.fps:g} Hz: export each rate on its own")
        writer.add(episode)
    if writer is None:
        raise DatasetError("no trial had 2 or more steps and a video: nothing to export")
    return writer.finish()


@dataclasses.dataclass(frozen=True)
class ExportLeRobotConfig:
    """Export trial records as a LeRobotDataset."""

    runs: tyro.conf.Positional[Path]  # a folder of trial records (runs/<date>/<policy>/<task>/trial_<n>/); every trial below it
    out: Path  # the dataset root to create (must be new or empty)
    version: Literal["v3.0", "v2.1"] = "v3.0"  # LeRobotDataset codebase version
    codec: Literal["av1", "h264", "lossless"] = "av1"  # video: AV1 (LeRobot's default), H.264, or lossless H.264 RGB
    image_size: int | None = None  # px, square size the frames are resized to; None keeps the video's size

    def __post_init__(self) -> None:
        if self.image_size is not None and self.image_size < 8:
            raise ValueError(f"--image-size {self.image_size}: must be at least 8 px")


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (2 for bad input)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cfg = tyro.cli(ExportLeRobotConfig, args=argv)
    trials = find_trials(cfg.runs)
    try:
        if not trials:
            raise DatasetError(f"{cfg.runs}: no trial records (meta.json + steps.jsonl) below it")
        root = export_trials(trials, cfg.out, cfg.version, cfg.codec, cfg.image_size)
    except DatasetError as e:
        print(f"mqe-export-lerobot: error: {e}", file=sys.stderr)
        return 2
    info = json.loads((root / "meta" / "info.json").read_text())
    print(f"wrote {root}: LeRobotDataset {info['codebase_version']}, {info['total_episodes']} episodes, "
          f"{info['total_frames']} frames at {info['fps']:g} fps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
