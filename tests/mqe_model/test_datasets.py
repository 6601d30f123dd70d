"""Every data format to a training-ready dataset: OGBench .npz, canonical directories, RLDS."""

from __future__ import annotations

import numpy as np
import pytest
from train_helpers import TMP, run_args, write_image_dataset, write_state_npz

from mqe_model import train
from mqe_model.data import rlds
from mqe_model.data.dataset import DatasetError
from mqe_model.data.normalization import ActionStats
from mqe_model.data.prepare import fingerprint, prepare
from mqe_model.policy import load_policy


def test_normalization_round_trips_and_handles_constant_dimensions():
    actions = np.random.default_rng(0).normal(size=(100, 3)).astype(np.float32) * [1, 5, 0]
    stats = ActionStats.from_actions(actions)
    normalized = stats.normalize(actions)
    assert normalized.min() >= -1 and normalized.max() <= 1
    np.testing.assert_allclose(stats.unnormalize(normalized), actions, atol=1e-5)
    np.testing.assert_array_equal(normalized[:, 2], 0)
    np.testing.assert_allclose(stats.unnormalize(np.full(3, 7.0)), stats.high, rtol=1e-6)  # clipped
    assert ActionStats.from_json(stats.to_json()) == stats


def test_npz_is_prepared_and_fingerprinted(tmp_path):
    path = write_state_npz(tmp_path / "a.npz", episodes=3, length=10)
    data = prepare(path)
    assert data.image is None and data.info["num_transitions"] == 30 and data.info["format"] == "ogbench_npz"
    assert np.abs(data.dataset.actions).max() <= 1
    assert data.info["fingerprint"] == prepare(path).info["fingerprint"]
    other = prepare(write_state_npz(tmp_path / "b.npz", episodes=3, length=10, seed=1))
    assert other.info["fingerprint"] != data.info["fingerprint"]
    assert fingerprint(data.dataset) != data.info["fingerprint"]  # taken over the raw actions


def test_canonical_images_are_resized_with_the_checkpoint_spec(tmp_path):
    data = prepare(write_image_dataset(tmp_path / "imgs", size=32), image_size=16)
    assert data.image == {"height": 16, "width": 16, "resize": "area"}
    assert data.dataset.observations.shape[1:] == (16, 16, 3)
    assert data.observation == {"shape": [16, 16, 3], "dtype": "uint8"}


def _rlds_dir(root, episodes=3, length=6, size=24):
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    (root / "dataset_info.json").write_text('{"name": "bridge_dataset"}')
    eps = [{"images": rng.integers(0, 256, size=(length, size, size, 3), dtype=np.uint8),
            "actions": rng.normal(size=(length, 7)).astype(np.float32)} for _ in range(episodes)]
    rlds.write_episodes(root / "bridge_dataset-train.tfrecord-00000-of-00001", eps)
    return root, eps


def test_rlds_round_trip(tmp_path):
    root, eps = _rlds_dir(tmp_path / "bridge")
    data = prepare(root)
    assert data.info["format"] == "rlds" and data.dataset.size == 18
    np.testing.assert_array_equal(data.dataset.observations[6:12], eps[1]["images"])
    raw = np.concatenate([e["actions"] for e in eps])
    np.testing.assert_allclose(data.action_stats.unnormalize(data.dataset.actions), raw, atol=1e-5)
    assert list(np.flatnonzero(data.dataset.terminals)) == [5, 11, 17]


def test_rlds_corrupt_file_is_named(tmp_path):
    root, _ = _rlds_dir(tmp_path / "bridge")
    path = next(root.glob("*.tfrecord*"))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DatasetError, match="truncated TFRecord"):
        prepare(root)


@pytest.mark.parametrize("fmt", ["canonical", "rlds"])
def test_image_data_trains_gcbc_to_a_checkpoint(fmt):
    data = write_image_dataset(TMP / "img-canonical") if fmt == "canonical" else _rlds_dir(TMP / "img-rlds")[0]
    workdir = TMP / f"img-run-{fmt}"
    args = run_args(workdir, data, "gcbc", 10, "--set", "encoder=impala_tiny", "batch_size=8",
                    "--image-size", "16")
    assert train.main(args) == 0
    policy = load_policy(workdir)
    assert policy.metadata["image"]["height"] == 16 and policy.observation_shape == (16, 16, 3)
    images = np.zeros((2, 16, 16, 3), np.uint8)
    actions, _ = policy.act_fn(policy.params, images, images)
    assert actions.shape == (2, 7)


def _declare(root, **fields):
    import json

    meta = json.loads((root / "dataset.json").read_text())
    (root / "dataset.json").write_text(json.dumps({**meta, **fields}))
    return root


def test_action_names_and_control_rate_travel_into_the_checkpoint_metadata(tmp_path):
    names = ["dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper"]
    root = _declare(write_image_dataset(tmp_path / "named"), action_names=names, control_hz=5,
                    action_frame="previous_target")
    info = prepare(root).info
    assert info["action_names"] == names and info["control_hz"] == 5.0
    assert info["action_frame"] == "previous_target"
    plain = prepare(write_image_dataset(tmp_path / "plain")).info
    assert "action_names" not in plain and "control_hz" not in plain and "action_frame" not in plain


def test_the_dataset_action_frames_are_the_ones_the_robot_client_applies():
    from mqe_model.data.prepare import ACTION_FRAMES
    from robot_client.safety import ACTION_FRAMES as CLIENT_FRAMES
    from robot_client.safety import DEFAULT_ACTION_FRAME

    assert ACTION_FRAMES == CLIENT_FRAMES and DEFAULT_ACTION_FRAME == "measured"


@pytest.mark.parametrize(("fields", "message"), [
    ({"action_names": ["dx", "dy"]}, "action_names must be a list of 7 strings"),
    ({"control_hz": 0}, "control_hz must be a positive number of Hz, got 0"),
    ({"control_hz": "5"}, "control_hz must be a positive number of Hz, got '5'"),
    ({"action_frame": "target"}, "action_frame must be one of measured, previous_target .*, got 'target'"),
])
def test_bad_robot_fields_are_refused_with_the_file(tmp_path, fields, message):
    root = _declare(write_image_dataset(tmp_path / "bad"), **fields)
    with pytest.raises(DatasetError, match=message) as excinfo:
        prepare(root)
    assert "dataset.json" in str(excinfo.value)
