"""`mqe-sim-data` writes a canonical dataset that the training loader reads, deterministically."""

import json

import numpy as np
import pytest

from mqe_model.data.dataset import load_dataset
from robot_client.sim import datagen


def _run(out, *extra):
    return datagen.main(
        ["--out", str(out), "--episodes", "3", "--episodes-per-shard", "2", "--seed", "5", *extra]
    )


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim") / "data"
    assert _run(out) == 0
    return out


def test_dataset_loads_and_records_its_settings(dataset_dir):
    data = load_dataset(dataset_dir)
    meta = json.loads((dataset_dir / "dataset.json").read_text())
    assert meta["format"] == "mqe-canonical" and meta["version"] == 1
    assert meta["observation"] == {"kind": "image", "shape": [128, 128, 3], "dtype": "uint8"}
    assert (
        meta["action_dim"] == 7 and meta["control_hz"] == 5.0 and meta["source"] == "mqe-sim-data"
    )
    assert (
        meta["seed"] == 5 and meta["settings"]["noise"] == 0.1 and meta["settings"]["workers"] == 1
    )
    assert sorted(p.name for p in dataset_dir.iterdir()) == [
        "dataset.json",
        "shard-00000.npz",
        "shard-00001.npz",
    ]
    assert data.observations.shape[1:] == (128, 128, 3) and data.proprio.shape[1] == 7
    assert len(data.trajectory_lengths) == 3 == meta["num_episodes"]
    assert [e["length"] for e in meta["episodes"]] == data.trajectory_lengths.tolist()
    assert {e["primitive"] for e in meta["episodes"]} == set(datagen.PRIMITIVES)  # primitives only
    assert data.size == meta["num_transitions"]


def test_worker_count_does_not_change_the_data(dataset_dir, tmp_path):
    assert _run(tmp_path / "par", "--workers", "2") == 0
    a, b = load_dataset(dataset_dir), load_dataset(tmp_path / "par")
    np.testing.assert_array_equal(a.observations, b.observations)
    np.testing.assert_array_equal(a.actions, b.actions)


def test_refuses_a_non_empty_directory(dataset_dir, capsys):
    assert _run(dataset_dir) == 1
    assert "not empty" in capsys.readouterr().err
    stray = dataset_dir.parent / "other"
    stray.mkdir()
    (stray / "notes.txt").write_text("keep me")
    assert _run(stray, "--overwrite") == 0
    assert (stray / "notes.txt").read_text() == "keep me"  # --overwrite removes only our files


def test_generated_dataset_trains_with_mqe_train(dataset_dir, tmp_path):
    """The twin's data goes through the real training entry point to a loadable checkpoint."""
    from mqe_model import train
    from mqe_model.policy import load_policy

    workdir = tmp_path / "run"
    code = train.main([
        "--agent", "mqe", "--preset", "tiny", "--set", "encoder=impala_tiny", "batch_size=8",
        "--image-size", "32", "--data", str(dataset_dir), "--workdir", str(workdir),
        "--steps", "4", "--updates-per-dispatch", "2", "--log-every", "2",
    ])
    assert code == 0
    policy = load_policy(workdir)
    assert policy.observation_shape == (32, 32, 3) and policy.action_dim == 7 and policy.step == 4
