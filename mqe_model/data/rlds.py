"""BridgeData V2 as published (RLDS, a TFDS dataset of TFRecord files), read without TensorFlow.

A TFDS RLDS directory (e.g. `bridge_dataset/1.0.0/` or `bridge/0.1.0/`) holds `dataset_info.json`,
`features.json` and files `<name>-<split>.tfrecord-XXXXX-of-YYYYY`; each record is one episode, a
serialized `tf.train.Example` whose features are the episode's steps flattened with '/'. The
records are read with the `tfrecord` package and parsed with its `tf.train.Example` protobuf; the
images are decoded by OpenCV (`pip install -e ".[bridge]"`). Two releases, told apart by their
features:

| release | action | camera | state |
| --- | --- | --- | --- |
| Berkeley's `bridge_dataset` | `steps/action` (T * 7) | `steps/observation/image_0` | `steps/observation/state` (T * 7) |
| Open X-Embodiment's `bridge` | `steps/action/world_vector` (3), `rotation_delta` (3), `open_gripper` (bool) | `steps/observation/image` | `steps/observation/state` |

Both become 7-d actions (dx, dy, dz, droll, dpitch, dyaw, gripper) under the conventions of the
official BridgeData loader and Octo's Bridge transforms:

- the first step, whose action is all zero, is dropped;
- the gripper is binarized: above 0.95 open (1), below 0.05 closed (0), values in between take the
  next step that is open or closed (an episode ending in between keeps its last raw value);
- with `actions="reached"` (the default) the six movement dimensions are relabelled to the deltas
  of the state actually reached, state[t + 1] - state[t] (angle deltas wrapped into (-pi, pi]), the
  action frame "measured"; the last step, with no reached state after it, gets zero movement (it
  is never a training sample). `actions="commanded"` keeps the recorded commands, the action frame
  "previous_target".

Episodes are decoded one at a time into a memory-mapped cache (`mqe_model.data.stream`), so the
whole dataset never has to fit in memory. Episodes left with fewer than 2 steps are skipped with a
warning: they hold no transition to learn from.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mqe_client.images import preprocess_images
from mqe_model.data import stream
from mqe_model.data.dataset import Dataset, DatasetError

logger = logging.getLogger(__name__)

STATE_KEY = "steps/observation/state"
RELEASES = {  # release -> (image key, action keys)
    "berkeley": ("steps/observation/image_0", ("steps/action",)),
    "oxe": ("steps/observation/image", ("steps/action/world_vector", "steps/action/rotation_delta",
                                        "steps/action/open_gripper")),
}
ACTION_FRAME = {"reached": "measured", "commanded": "previous_target"}  # checkpoint `action_frame`
BridgeActions = Literal["reached", "commanded"]
GRIPPER_OPEN, GRIPPER_CLOSED = 0.95, 0.05  # binarization thresholds of the official loader


def read_examples(path: Path):
    """(index, {feature: list of bytes | float32 array | int64 array}) of each record of a TFRecord file."""
    from tfrecord import example_pb2
    from tfrecord.reader import tfrecord_iterator

    try:
        for i, record in enumerate(tfrecord_iterator(str(path))):
            try:
                example = example_pb2.Example.FromString(bytes(record))
            except Exception as e:  # protobuf's DecodeError
                raise DatasetError(f"{path} episode {i}: not a tf.train.Example ({e}); re-download the file") from None
            features = {}
            for name, feature in example.features.feature.items():
                kind = feature.WhichOneof("kind")
                if kind == "bytes_list":
                    features[name] = list(feature.bytes_list.value)
                elif kind == "float_list":
                    features[name] = np.asarray(feature.float_list.value, np.float32)
                else:
                    features[name] = np.asarray(feature.int64_list.value if kind else [], np.int64)
            yield i, features
    except RuntimeError as e:  # the tfrecord reader's "Failed to read the record ..."
        raise DatasetError(f"{path}: truncated TFRecord ({e}); re-download the file") from None


def binarize_gripper(gripper: np.ndarray) -> np.ndarray:
    """The official loader's gripper binarization (module docstring), on one episode."""
    out = np.empty(len(gripper), np.float32)
    carry = float(gripper[-1])
    for t in range(len(gripper) - 1, -1, -1):
        if gripper[t] > GRIPPER_OPEN or gripper[t] < GRIPPER_CLOSED:
            carry = float(gripper[t] > GRIPPER_OPEN)
        out[t] = carry
    return out


def relabel_to_reached(states: np.ndarray, gripper: np.ndarray) -> np.ndarray:
    """Movement = the reached state's delta (xyz and roll, pitch, yaw), the gripper as given."""
    movement = np.zeros((len(states), 6), np.float32)
    delta = np.diff(states[:, :6].astype(np.float64), axis=0)
    delta[:, 3:] = np.angle(np.exp(1j * delta[:, 3:]))  # wrap: a yaw crossing +-pi is a small turn
    movement[:-1] = delta
    return np.concatenate([movement, gripper[:, None]], axis=1)


def detect_release(features: dict[str, Any], where: str) -> str:
    """'berkeley' or 'oxe' from the features of one record."""
    for release, (image_key, action_keys) in RELEASES.items():
        if image_key in features and all(k in features for k in action_keys):
            return release
    raise DatasetError(f"{where}: neither BridgeData V2 release's features (steps/action with "
                       f"steps/observation/image_0, or steps/action/world_vector with steps/observation/image); "
                       f"found {sorted(features)}")


def _decode_images(encoded: list[bytes], where: str, key: str) -> np.ndarray:
    import cv2

    frames = []
    for data in encoded:
        bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if bgr is None:
            raise DatasetError(f"{where}: an image of {key} is not a decodable JPEG/PNG")
        frames.append(bgr[..., ::-1])
    return np.stack(frames)


def episode_arrays(features: dict[str, Any], where: str, actions: BridgeActions,
                   image_size: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """(images, 7-d actions, states) of one record under the module's conventions; None if too short."""
    release = detect_release(features, where)
    image_key, action_keys = RELEASES[release]
    length = len(features[image_key])
    if release == "berkeley":
        raw = np.asarray(features["steps/action"], np.float32)
        if length == 0 or raw.size != 7 * length:
            raise DatasetError(f"{where}: {raw.size} action values for {length} steps; expected 7 per step")
        raw = raw.reshape(length, 7)
    else:
        parts = [np.asarray(features[k], np.float32).reshape(length, -1) for k in action_keys]
        raw = np.concatenate(parts, axis=1)
        if raw.shape[1] != 7:
            raise DatasetError(f"{where}: world_vector, rotation_delta and open_gripper make {raw.shape[1]} "
                               "values per step; expected 3 + 3 + 1")
    states = None
    if STATE_KEY in features:
        states = np.asarray(features[STATE_KEY], np.float32)
        if states.size % max(length, 1):
            raise DatasetError(f"{where}: {states.size} state values for {length} steps")
        states = states.reshape(length, -1)[1:]
    elif actions == "reached":
        raise DatasetError(f"{where}: no {STATE_KEY} to relabel the actions from; pass "
                           "--bridge-actions commanded to train on the recorded commands")
    raw, encoded = raw[1:], features[image_key][1:]  # the first step's action is all zero
    if len(encoded) < 2:
        logger.warning("%s: skipping an episode of %d step(s) after its first", where, len(encoded))
        return None
    gripper = binarize_gripper(raw[:, 6])
    if actions == "reached":
        labelled = relabel_to_reached(states, gripper)
    else:
        labelled = np.concatenate([raw[:, :6], gripper[:, None]], axis=1)
    images = _decode_images(encoded, where, image_key)
    if image_size:
        images = preprocess_images(images, image_size, image_size)
    return images, labelled, states


def load_rlds(root: Path, split: str = "train", image_size: int | None = None,
              actions: BridgeActions = "reached", cache_dir: Path | None = None) -> Dataset:
    """All episodes of `split` in a TFDS directory, decoded into (or read back from) the cache."""
    if actions not in ACTION_FRAME:
        raise DatasetError(f"actions={actions!r}: choose one of {sorted(ACTION_FRAME)}")
    files = sorted(root.glob(f"*-{split}.tfrecord*"))
    if not files:
        raise DatasetError(f"{root}: no *-{split}.tfrecord* files; point --data at the TFDS version "
                           "directory, e.g. bridge_dataset/1.0.0 or bridge/0.1.0")
    key = stream.source_key(files, {"reader": "rlds-1", "split": split, "image_size": image_size,
                                    "actions": actions})
    directory = Path(cache_dir or stream.default_cache_dir()) / f"rlds-{key}"
    cached = stream.open_cached(directory)
    if cached is not None:
        logger.info("read %d decoded steps of %s from %s", cached.size, root, directory)
        return cached
    writer = stream.EpisodeWriter(directory, str(root))
    try:
        for path in files:
            for i, features in read_examples(path):
                episode = episode_arrays(features, f"{path} episode {i}", actions, image_size)
                if episode is not None:
                    writer.add(*episode)
    except BaseException:
        writer.abort()
        raise
    logger.info("decoded %d episodes (%d steps) from %d file(s) in %s into %s", writer.episodes,
                writer.steps, len(files), root, directory)
    return writer.finish()
