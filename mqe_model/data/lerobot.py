"""LeRobotDataset (codebase v2.0, v2.1 and v3.0) read into the canonical Dataset, by the published
format with pyarrow (parquet) and PyAV (mp4), without the `lerobot` package or torch.

| | v2.x | v3.0 |
| --- | --- | --- |
| episodes | `meta/episodes.jsonl` (`episode_index`, `length`) | `meta/episodes/chunk-*/file-*.parquet` (`episode_index`, `length`, `data/chunk_index`, `data/file_index`, `videos/<key>/chunk_index`, `file_index`, `from_timestamp`) |
| frames | `data/chunk-000/episode_000000.parquet`, one per episode | `data/chunk-000/file-000.parquet`, episodes back to back |
| video | `videos/chunk-000/<key>/episode_000000.mp4`, from t = 0 | `videos/<key>/chunk-000/file-000.mp4`, the episode from `from_timestamp` on |

(paths from `meta/info.json`'s `data_path` and `video_path`). Frame t of an episode is the video
frame nearest to `from_timestamp + timestamp[t]`, as LeRobot's own decoder picks it. `action`
becomes the actions, `observation.state` (when present) the proprioception and one camera (the first
image or video feature of `meta/info.json`, or `camera`) the observations; images are resized to
`image_size` while decoding, into the memory-mapped cache of `mqe_model.data.stream`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from mqe_client.images import preprocess_images
from mqe_model.data import stream
from mqe_model.data.dataset import Dataset, DatasetError

logger = logging.getLogger(__name__)

VERSIONS = ("v2.0", "v2.1", "v3.0")
ACTION_KEY = "action"
STATE_KEY = "observation.state"
INFO = Path("meta") / "info.json"


def read_info(root: Path) -> dict[str, Any]:
    """meta/info.json, checked for what this reader needs."""
    path = root / INFO
    try:
        info = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError) as e:
        raise DatasetError(f"{path}: not a readable LeRobotDataset info file ({e})") from None
    version = info.get("codebase_version")
    if version not in VERSIONS:
        raise DatasetError(f"{path}: codebase_version {version!r}; this reader understands {list(VERSIONS)} "
                           "(convert older datasets with lerobot's conversion scripts)")
    features = info.get("features", {})
    if ACTION_KEY not in features:
        raise DatasetError(f"{path}: no '{ACTION_KEY}' feature; found {sorted(features)}")
    return info


def cameras(info: dict[str, Any]) -> list[str]:
    """The image and video features, in meta/info.json's order."""
    return [k for k, f in info["features"].items() if f.get("dtype") in ("video", "image")]


def robot_fields(root: Path, action_dim: int) -> dict[str, Any]:
    """`control_hz` (the fps), `action_names` and `action_frame` as far as the dataset declares them."""
    info = read_info(root)
    action = info["features"][ACTION_KEY]
    names = action.get("names")
    if isinstance(names, dict):  # older datasets: {"motors": [...]}
        names = next(iter(names.values()), None)
    fields: dict[str, Any] = {"control_hz": float(info["fps"])}
    if isinstance(names, list) and len(names) == action_dim and all(isinstance(n, str) for n in names):
        fields["action_names"] = names
    frame = (action.get("info") or {}).get("action_frame")
    if frame is not None:
        fields["action_frame"] = frame
    return fields


def _episodes(root: Path, info: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per episode, in episode order: where its frames and video are."""
    if info["codebase_version"].startswith("v2"):
        path = root / "meta" / "episodes.jsonl"
        try:
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        except (FileNotFoundError, json.JSONDecodeError) as e:
            raise DatasetError(f"{path}: not readable ({e})") from None
        return sorted(rows, key=lambda r: r["episode_index"])
    import pyarrow.parquet as pq

    files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    if not files:
        raise DatasetError(f"{root}: no meta/episodes/chunk-*/file-*.parquet; is this a v3.0 dataset?")
    rows = [row for f in files for row in pq.read_table(f).to_pylist()]
    return sorted(rows, key=lambda r: r["episode_index"])


def _data_path(root: Path, info: dict[str, Any], episode: dict[str, Any]) -> Path:
    index = episode["episode_index"]
    if info["codebase_version"].startswith("v2"):
        chunk = index // info.get("chunks_size", 1000)
        return root / info["data_path"].format(episode_chunk=chunk, episode_index=index)
    return root / info["data_path"].format(chunk_index=episode["data/chunk_index"],
                                           file_index=episode["data/file_index"])


def _video_path(root: Path, info: dict[str, Any], episode: dict[str, Any], key: str) -> tuple[Path, float]:
    """The episode's video file and the time its first frame has there."""
    index = episode["episode_index"]
    if info["codebase_version"].startswith("v2"):
        chunk = index // info.get("chunks_size", 1000)
        return root / info["video_path"].format(episode_chunk=chunk, video_key=key, episode_index=index), 0.0
    path = root / info["video_path"].format(video_key=key, chunk_index=episode[f"videos/{key}/chunk_index"],
                                            file_index=episode[f"videos/{key}/file_index"])
    return path, float(episode[f"videos/{key}/from_timestamp"])


class VideoCursor:
    """Decodes one mp4 front to back, handing out the frames nearest to increasing times."""

    def __init__(self, path: Path, fps: float):
        import av

        try:
            self._container = av.open(str(path))
        except (FileNotFoundError, av.error.FFmpegError) as e:
            raise DatasetError(f"{path}: cannot open the video ({e})") from None
        self.path, self.tolerance = path, 0.5 / fps
        self._frames = self._container.decode(video=0)
        self._current: tuple[float, np.ndarray] | None = None

    def frames_at(self, times: np.ndarray) -> np.ndarray:
        """RGB frames (len(times), H, W, 3) at `times` (seconds, increasing)."""
        out = []
        for t in times:
            while self._current is None or self._current[0] < t - self.tolerance:
                frame = next(self._frames, None)
                if frame is None:
                    raise DatasetError(f"{self.path}: no frame at {t:.3f} s (the video ends earlier)")
                self._current = (float(frame.time), frame.to_ndarray(format="rgb24"))
            if abs(self._current[0] - t) > self.tolerance:
                raise DatasetError(f"{self.path}: no frame within {self.tolerance:.3f} s of {t:.3f} s")
            out.append(self._current[1])
        return np.stack(out)

    def close(self) -> None:
        """Close the file."""
        self._container.close()


def _decode_images(column: list[Any], where: str) -> np.ndarray:
    import cv2

    frames = []
    for cell in column:  # HF datasets' Image: {"bytes", "path"}
        data = cell.get("bytes") if isinstance(cell, dict) else None
        bgr = None if not data else cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if bgr is None:
            raise DatasetError(f"{where}: an image cell holds no decodable PNG/JPEG bytes")
        frames.append(bgr[..., ::-1])
    return np.stack(frames)


def load_lerobot(root: Path, image_size: int | None = None, camera: str | None = None,
                 cache_dir: Path | None = None) -> Dataset:
    """Every episode of a local LeRobotDataset, decoded into (or read back from) the cache."""
    import pyarrow.parquet as pq

    info = read_info(root)
    available = cameras(info)
    if camera is None:
        if not available:
            raise DatasetError(f"{root / INFO}: no image or video feature to train on")
        camera = available[0]
    elif camera not in available:
        raise DatasetError(f"{root / INFO}: no image or video feature {camera!r}; choose one of {available}")
    files = [root / INFO, *sorted(root.rglob("*.parquet")), *sorted(root.rglob("*.mp4")),
             *sorted((root / "meta").glob("*.jsonl"))]
    key = stream.source_key(files, {"reader": "lerobot-1", "image_size": image_size, "camera": camera})
    directory = Path(cache_dir or stream.default_cache_dir()) / f"lerobot-{key}"
    cached = stream.open_cached(directory)
    if cached is not None:
        return cached
    is_video = info["features"][camera]["dtype"] == "video"
    has_state = STATE_KEY in info["features"]
    fps = float(info["fps"])
    writer = stream.EpisodeWriter(directory, str(root))
    cursors: dict[Path, VideoCursor] = {}
    tables: dict[Path, Any] = {}
    try:
        for episode in _episodes(root, info):
            index = episode["episode_index"]
            where = f"{root} episode {index}"
            path = _data_path(root, info, episode)
            if path not in tables:
                tables.clear()  # v3 files hold many episodes in order: one file in memory at a time
                try:
                    tables[path] = pq.read_table(path)
                except (FileNotFoundError, OSError) as e:
                    raise DatasetError(f"{path}: cannot read the frames ({e})") from None
            table = tables[path]
            rows = table.filter(_equals(table["episode_index"], index)).sort_by("frame_index")
            if rows.num_rows < 2:
                logger.warning("%s: skipping an episode of %d frame(s)", where, rows.num_rows)
                continue
            actions = np.asarray(rows[ACTION_KEY].to_pylist(), np.float32)
            state = np.asarray(rows[STATE_KEY].to_pylist(), np.float32) if has_state else None
            if is_video:
                video, start = _video_path(root, info, episode, camera)
                if video not in cursors:
                    for old in cursors.values():
                        old.close()
                    cursors = {video: VideoCursor(video, fps)}
                times = start + np.asarray(rows["timestamp"].to_pylist(), np.float64)
                images = cursors[video].frames_at(times)
            else:
                images = _decode_images(rows[camera].to_pylist(), where)
            if image_size:
                images = preprocess_images(images, image_size, image_size)
            writer.add(images, actions.reshape(len(actions), -1), state)
    except BaseException:
        writer.abort()
        raise
    finally:
        for cursor in cursors.values():
            cursor.close()
    logger.info("decoded %d episodes (%d frames, camera %s) of %s into %s", writer.episodes, writer.steps,
                camera, root, directory)
    return writer.finish()


def _equals(column: Any, value: int) -> Any:
    import pyarrow.compute as pc

    return pc.equal(column, value)
