"""BridgeData V2 through the `tfrecord` package: both releases, the official loader's conventions,
the memory-mapped cache and bounded memory."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from rlds_helpers import bridge_episodes, write_bridge_dir

from mqe_model.data import rlds
from mqe_model.data.dataset import DatasetError
from mqe_model.data.prepare import prepare


def _wrapped(x: np.ndarray) -> np.ndarray:
    return (x + np.pi) % (2 * np.pi) - np.pi


def test_binarize_gripper_as_the_official_loader():
    raw = np.array([1.0, 0.5, 0.02, 0.5, 0.98, 0.6], np.float32)
    np.testing.assert_array_equal(rlds.binarize_gripper(raw), np.float32([1, 0, 0, 1, 1, 0.6]))  # last in between: kept


def test_commanded_actions_drop_the_zero_first_step(tmp_path):
    eps = bridge_episodes(3, 6, 16)
    eps[1]["actions"][2, 6] = 0.5  # in between: takes the next step's open/closed value
    data = prepare(write_bridge_dir(tmp_path / "b", eps), bridge_actions="commanded", cache_dir=tmp_path / "c")
    assert data.info["format"] == "rlds" and data.dataset.size == 15 and data.action_frame == "previous_target"
    assert list(np.flatnonzero(data.dataset.terminals)) == [4, 9, 14]
    np.testing.assert_array_equal(data.dataset.observations[5:10], eps[1]["images"][1:])
    np.testing.assert_array_equal(data.dataset.proprio[5:10], eps[1]["states"][1:])
    raw = np.concatenate([e["actions"][1:] for e in eps])
    raw[5 + 1, 6] = eps[1]["actions"][3, 6]
    assert data.action_stats.scheme == "bounds_q99"
    low, high = np.array(data.action_stats.low), np.array(data.action_stats.high)
    np.testing.assert_allclose(data.action_stats.unnormalize(data.dataset.actions), np.clip(raw, low, high), atol=1e-6)


def test_reached_actions_are_the_state_deltas(tmp_path):
    eps = bridge_episodes(2, 7, 16, seed=3)
    eps[0]["states"][4, 5] = 3.1
    eps[0]["states"][5, 5] = -3.1  # a yaw across +-pi: a small turn, not 6.2 rad
    loaded = rlds.load_rlds(write_bridge_dir(tmp_path / "b", eps), cache_dir=tmp_path / "c")
    for i, ep in enumerate(eps):
        got = loaded.actions[6 * i : 6 * i + 6]
        states = ep["states"][1:].astype(np.float64)
        expected = np.diff(states[:, :6], axis=0)
        expected[:, 3:] = _wrapped(expected[:, 3:])
        np.testing.assert_allclose(got[:-1, :6], expected, atol=1e-6)
        np.testing.assert_array_equal(got[-1, :6], 0)  # no reached state after the last step
        np.testing.assert_array_equal(got[:, 6], ep["actions"][1:, 6])
    assert abs(loaded.actions[3, 5] - (2 * np.pi - 6.2)) < 1e-5


def test_the_oxe_copy_reads_as_the_berkeley_release(tmp_path):
    eps = bridge_episodes(3, 5, 16, seed=5)
    berkeley = rlds.load_rlds(write_bridge_dir(tmp_path / "berkeley", eps), cache_dir=tmp_path / "c")
    oxe = rlds.load_rlds(write_bridge_dir(tmp_path / "oxe", eps, release="oxe"), cache_dir=tmp_path / "c")
    for name in ("observations", "actions", "terminals", "proprio"):
        np.testing.assert_array_equal(getattr(oxe, name), getattr(berkeley, name))


def test_bad_files_say_what_and_how(tmp_path):
    root = write_bridge_dir(tmp_path / "b", bridge_episodes(2, 5, 8))
    path = next(root.glob("*.tfrecord*"))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DatasetError, match="truncated TFRecord .*re-download the file"):
        rlds.load_rlds(root, cache_dir=tmp_path / "c")
    assert not list((tmp_path / "c").glob("*/layout.json"))  # nothing half-decoded is ever read back
    eps = bridge_episodes(1, 5, 8)
    other = tmp_path / "other"
    write_bridge_dir(other, eps)
    import tfrecord

    writer = tfrecord.TFRecordWriter(str(next(other.glob("*.tfrecord*"))))
    writer.write({"steps/reward": ([0.0, 1.0], "float")})
    writer.close()
    with pytest.raises(DatasetError, match="neither BridgeData V2 release's features"):
        rlds.load_rlds(other, cache_dir=tmp_path / "c")
    with pytest.raises(DatasetError, match="applies to BridgeData V2"):
        prepare(_npz(tmp_path), bridge_actions="commanded")


def _npz(tmp_path):
    path = tmp_path / "s.npz"
    terminals = np.zeros(4, bool)
    terminals[-1] = True
    np.savez(path, observations=np.zeros((4, 2), np.float32), actions=np.zeros((4, 2), np.float32),
             terminals=terminals)
    return path


def test_streaming_keeps_memory_bounded_and_the_cache_is_reused(tmp_path):
    eps = bridge_episodes(32, 26, 96, seed=7)  # 8 shards, 800 kept steps of 96 x 96: 22 MB decoded
    root = write_bridge_dir(tmp_path / "big", eps, shards=8)
    del eps
    tracemalloc.start()
    data = prepare(root, cache_dir=tmp_path / "c")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    observations = data.dataset.observations
    assert isinstance(observations, np.memmap) and observations.nbytes == 800 * 96 * 96 * 3
    assert peak < observations.nbytes / 4, f"peak {peak / 2**20:.1f} MiB while decoding"
    start = time.perf_counter()
    again = prepare(root, cache_dir=tmp_path / "c")
    assert time.perf_counter() - start < 2.0
    assert again.info["fingerprint"] == data.info["fingerprint"]
    np.testing.assert_array_equal(again.dataset.observations[::97], observations[::97])
    (root / "bridge_dataset-train.tfrecord-00007-of-00008").unlink()  # a changed source decodes anew
    assert prepare(root, cache_dir=tmp_path / "c").dataset.size == 700
