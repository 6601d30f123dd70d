"""BridgeData V2 episodes written as TFRecord files of both releases (the `tfrecord` package's writer)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import tfrecord


def write_episodes(path: Path, episodes: list[dict[str, np.ndarray]], release: str = "berkeley") -> None:
    """Episodes {"images": (T, H, W, 3) uint8, "actions": (T, 7), "states": (T, 7)} as one TFRecord file
    with the features of Berkeley's `bridge_dataset` or Open X-Embodiment's `bridge` (rlds.py)."""
    writer = tfrecord.TFRecordWriter(str(path))
    for ep in episodes:
        length = len(ep["actions"])
        first, last = np.zeros(length, np.int64), np.zeros(length, np.int64)
        first[0], last[-1] = 1, 1
        png = [cv2.imencode(".png", im[..., ::-1])[1].tobytes() for im in ep["images"]]
        actions = np.asarray(ep["actions"], np.float32)
        record = {"steps/is_first": (first.tolist(), "int"), "steps/is_last": (last.tolist(), "int"),
                  "steps/observation/state": (np.asarray(ep["states"], np.float32).ravel().tolist(), "float")}
        if release == "berkeley":
            record["steps/action"] = (actions.ravel().tolist(), "float")
            record["steps/observation/image_0"] = (png, "byte")
        else:
            record["steps/action/world_vector"] = (actions[:, :3].ravel().tolist(), "float")
            record["steps/action/rotation_delta"] = (actions[:, 3:6].ravel().tolist(), "float")
            record["steps/action/open_gripper"] = ((actions[:, 6] > 0.5).astype(int).tolist(), "int")
            record["steps/observation/image"] = (png, "byte")
        writer.write(record)
    writer.close()


def bridge_episodes(count: int, length: int, size: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Random episodes as Bridge has them: an all-zero first action, a gripper in {0, 1}."""
    rng = np.random.default_rng(seed)
    episodes = []
    for _ in range(count):
        actions = rng.normal(scale=0.02, size=(length, 7)).astype(np.float32)
        actions[:, 6] = rng.random(length) > 0.5
        actions[0] = 0
        states = np.cumsum(rng.normal(scale=0.05, size=(length, 7)), axis=0).astype(np.float32)
        episodes.append({"images": rng.integers(0, 256, size=(length, size, size, 3), dtype=np.uint8),
                         "actions": actions, "states": states})
    return episodes


def write_bridge_dir(root: Path, episodes: list[dict[str, np.ndarray]], release: str = "berkeley",
                     shards: int = 1) -> Path:
    """A TFDS version directory holding `episodes` split over `shards` files."""
    root.mkdir(parents=True, exist_ok=True)
    name = "bridge_dataset" if release == "berkeley" else "bridge"
    (root / "dataset_info.json").write_text(f'{{"name": "{name}"}}')
    for i, part in enumerate(np.array_split(np.arange(len(episodes)), shards)):
        write_episodes(root / f"{name}-train.tfrecord-{i:05d}-of-{shards:05d}", [episodes[j] for j in part], release)
    return root
