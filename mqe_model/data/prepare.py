"""From a path on disk to what training consumes: load, resize images, normalize actions, fingerprint."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from mqe_client.images import preprocess_images
from mqe_model.data.dataset import METADATA_FILE, Dataset, DatasetError, load_dataset
from mqe_model.data.normalization import ActionStats

# What a dataset's action deltas were added to, as its dataset.json may declare (`action_frame`):
# "measured" (the pose reached, e.g. Bridge relabelled to reached-state deltas) or "previous_target"
# (Bridge's commanded actions, added to the controller's previous target). The robot client applies
# the same convention (robot_client.safety.ACTION_FRAMES; a test keeps the two equal); no field
# means "measured".
ACTION_FRAMES = ("measured", "previous_target")

logger = logging.getLogger(__name__)

RESIZE_METHOD = "area"


@dataclasses.dataclass(frozen=True)
class PreparedData:
    """A dataset ready for the samplers, and what the checkpoint must remember about it."""

    dataset: Dataset  # actions normalized to [-1, 1], images at the training size
    action_stats: ActionStats  # of the raw actions, in robot units
    image: dict[str, Any] | None  # {"height", "width", "resize"} or None for states
    observation: dict[str, Any]  # {"shape", "dtype"} as the network sees it
    info: dict[str, Any]  # {"path", "format", "fingerprint", "num_transitions"[, "action_names", "control_hz"]}


def detect_format(path: Path) -> str:
    """'ogbench_npz', 'canonical' or 'rlds' from what is on disk."""
    if path.is_dir():
        if (path / METADATA_FILE).is_file():
            return "canonical"
        if (path / "dataset_info.json").is_file() or any(path.glob("*.tfrecord*")):
            return "rlds"
    return "canonical" if path.is_dir() else "ogbench_npz"


def load_any(path: str | Path, image_size: int | None = None) -> tuple[Dataset, str]:
    """Load any supported format; returns the canonical Dataset and the format name.

    RLDS images are resized to `image_size` while decoding (the published 256 x 256 frames of
    BridgeData V2 would not fit in memory otherwise); other formats are resized by `prepare`."""
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: no such file or directory")
    fmt = detect_format(path)
    if fmt == "rlds":
        from mqe_model.data.rlds import load_rlds

        return load_rlds(path, image_size=image_size), fmt
    return load_dataset(path), fmt


def fingerprint(dataset: Dataset) -> str:
    """sha256 over the observations, actions and terminals (shape, dtype and bytes), hex."""
    h = hashlib.sha256()
    for name in ("observations", "actions", "terminals"):
        arr = np.ascontiguousarray(getattr(dataset, name))
        h.update(f"{name}:{arr.dtype.str}:{arr.shape}".encode())
        h.update(memoryview(arr).cast("B"))
    return h.hexdigest()


def prepare(path: str | Path, image_size: int | None = None,
            expected_action_dim: int | None = None) -> PreparedData:
    """Load `path`, check it, resize images to `image_size` (None keeps them) and normalize actions."""
    raw, fmt = load_any(path, image_size)
    if expected_action_dim is not None and raw.action_dim != expected_action_dim:
        raise DatasetError(
            f"{path}: actions are {raw.action_dim}-d but the run expects {expected_action_dim}-d "
            "actions; use data recorded for the same robot, or start a new run"
        )
    digest = fingerprint(raw)
    stats = ActionStats.from_actions(raw.actions)
    observations, image = raw.observations, None
    if observations.ndim == 4:
        height, width = (image_size, image_size) if image_size else observations.shape[1:3]
        if observations.shape[1:3] != (height, width):
            logger.info("resizing %d images from %s to %dx%d (%s)", len(observations),
                        observations.shape[1:3], height, width, RESIZE_METHOD)
        observations = preprocess_images(observations, height, width, RESIZE_METHOD)
        image = {"height": int(height), "width": int(width), "resize": RESIZE_METHOD}
    dataset = dataclasses.replace(raw, observations=observations,
                                  actions=stats.normalize(raw.actions))
    return PreparedData(
        dataset=dataset,
        action_stats=stats,
        image=image,
        observation={"shape": list(observations.shape[1:]), "dtype": str(observations.dtype)},
        info={"path": str(Path(path).absolute()), "format": fmt, "fingerprint": digest,
              "num_transitions": int(raw.size), **robot_fields(Path(path), fmt, raw.action_dim)},
    )


def robot_fields(path: Path, fmt: str, action_dim: int) -> dict[str, Any]:
    """`action_names`, `control_hz` and `action_frame` where a canonical dataset declares them, so that
    the checkpoint (and the server's /v1/metadata) carries them; {} for sources that do not."""
    if fmt != "canonical":
        return {}
    meta_path = path / METADATA_FILE
    meta = json.loads(meta_path.read_text())  # load_dataset has already read and checked it
    fields: dict[str, Any] = {}
    names = meta.get("action_names")
    if names is not None:
        if not (isinstance(names, list) and len(names) == action_dim and all(isinstance(n, str) for n in names)):
            raise DatasetError(f"{meta_path}: action_names must be a list of {action_dim} strings "
                               f"(one per action dimension), got {names!r}")
        fields["action_names"] = names
    hz = meta.get("control_hz")
    if hz is not None:
        if isinstance(hz, bool) or not isinstance(hz, int | float) or not hz > 0:
            raise DatasetError(f"{meta_path}: control_hz must be a positive number of Hz, got {hz!r}")
        fields["control_hz"] = float(hz)
    frame = meta.get("action_frame")
    if frame is not None:
        if frame not in ACTION_FRAMES:
            raise DatasetError(f"{meta_path}: action_frame must be one of {', '.join(ACTION_FRAMES)} (what each "
                               f"action's delta was added to), got {frame!r}")
        fields["action_frame"] = frame
    return fields
