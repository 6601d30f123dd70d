"""benchmarks.train_throughput on the CPU: the per-device-batch ceiling trains on the batch's share."""

from __future__ import annotations

from benchmarks import train_throughput
from mqe_model import train


def test_the_ceiling_times_one_device_on_the_share_of_the_batch(tmp_path, monkeypatch):
    cfg = train_throughput.BenchConfig(preset="tiny", updates_per_dispatch=2)
    data = train_throughput.write_data(tmp_path / "data", cfg, images=False)
    batches = []
    prepare_run = train.prepare_run

    def spy(run):
        setup = prepare_run(run)
        batches.append(setup.agent_config.batch_size)
        return setup

    monkeypatch.setattr(train, "prepare_run", spy)
    assert train_throughput.bare_rate(cfg, data, iters=1) > 0
    assert train_throughput.bare_rate(cfg, data, iters=1, batch_divisor=2) > 0
    assert batches[1] * 2 == batches[0] == train.resolve_agent_config(
        train.TrainConfig(data=data, workdir=tmp_path, preset="tiny")).batch_size
