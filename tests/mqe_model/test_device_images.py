"""Frames on the device: index batches gathered there are the batches the host would have sampled."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from mqe_model import train
from mqe_model.agents import registry
from mqe_model.data import device_images
from mqe_model.data.dataset import Dataset
from mqe_model.parallel import DataParallel


def image_dataset(episodes: int = 5, length: int = 9, size: int = 8) -> Dataset:
    rng = np.random.default_rng(0)
    n = episodes * length
    terminals = np.zeros(n, bool)
    terminals[length - 1 :: length] = True
    return Dataset(rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8),
                   rng.uniform(-1, 1, (n, 3)).astype(np.float32), terminals)


@pytest.mark.parametrize("agent", ["mqe", "gcbc", "gciql"])
def test_gathered_index_batches_equal_the_host_batches_draw_for_draw(agent):
    dataset = image_dataset()
    config = registry.get(agent).get_config("tiny")
    host = registry.get(agent).make_sampler(dataset, config).sample(np.random.default_rng(7), 16)
    indexed = registry.get(agent).make_sampler(device_images.index_dataset(dataset), config)
    rows = indexed.sample(np.random.default_rng(7), 16)
    gathered = device_images.gather_images(rows, jax.numpy.asarray(dataset.observations), train.IMAGE_KEYS)
    assert set(gathered) == set(host)
    for key in host:
        np.testing.assert_array_equal(np.asarray(gathered[key]), host[key], err_msg=key)
    assert rows["observations"].dtype == np.int32 and rows["observations"].shape == (16, 1)


@dataclasses.dataclass
class FakeDevice:
    stats: dict | None

    def memory_stats(self) -> dict | None:
        return self.stats


def test_frames_stay_on_a_device_up_to_its_share_of_memory():
    limit = 10_000
    share = int(device_images.DEVICE_SHARE * limit)
    assert device_images.fits_on_device(share, FakeDevice({"bytes_limit": limit}))
    assert not device_images.fits_on_device(share + 1, FakeDevice({"bytes_limit": limit}))
    unreported = device_images.UNREPORTED_LIMIT_BYTES
    assert device_images.fits_on_device(unreported, FakeDevice(None))
    assert not device_images.fits_on_device(unreported + 1, FakeDevice({}))


def test_state_datasets_and_frames_too_large_are_sampled_on_the_host(monkeypatch):
    states = Dataset(np.zeros((10, 4), np.float32), np.zeros((10, 2), np.float32), np.eye(10, dtype=bool)[-1])
    parallel = DataParallel(1)
    assert train.place_images(states, parallel) == (states, None)
    frames = image_dataset()
    sampled, images = train.place_images(frames, parallel)
    np.testing.assert_array_equal(np.asarray(images), frames.observations)
    np.testing.assert_array_equal(sampled.observations[:, 0], np.arange(frames.size))
    monkeypatch.setattr(train, "fits_on_device", lambda nbytes, device: False)
    assert train.place_images(frames, parallel) == (frames, None)


def test_an_update_on_gathered_frames_equals_one_on_host_frames():
    dataset = image_dataset(size=16)
    config = dataclasses.replace(registry.get("mqe").get_config("tiny"), encoder="impala_tiny", batch_size=8)
    agent_module = registry.get("mqe")
    indexed = agent_module.make_sampler(device_images.index_dataset(dataset), config)
    rows = [indexed.sample(np.random.default_rng(s), 8) for s in range(2)]
    index_batches = {k: np.stack([r[k] for r in rows]) for k in rows[0]}
    host_batches = device_images.gather_images(index_batches, dataset.observations, train.IMAGE_KEYS)
    example = {k: v[0] for k, v in host_batches.items()}
    step = train.make_train_step("shift", 0.5, 1)
    key = jax.random.PRNGKey(3)
    on_host, host_info = step(agent_module.Agent.create(0, example, config), host_batches, key)
    on_device, device_info = step(agent_module.Agent.create(0, example, config), index_batches, key,
                                  jax.numpy.asarray(dataset.observations))
    for a, b in zip(jax.tree_util.tree_leaves(on_host.params), jax.tree_util.tree_leaves(on_device.params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
    assert float(host_info["critic/loss"]) == pytest.approx(float(device_info["critic/loss"]), rel=1e-6)
