"""server.metrics: the counters as /metrics renders them, read back by `sample_total`."""

from __future__ import annotations

from server.metrics import ServerMetrics, sample_total


def test_sample_total_sums_one_sample_over_its_label_sets_and_nothing_else():
    metrics = ServerMetrics()
    assert sample_total(metrics.render().decode(), "mqe_inline_acts_total") == 0.0  # none yet
    for device in ("cpu:0", "cpu:0", "cuda:1"):
        metrics.observe_inline(device)
    text = metrics.render().decode()
    assert sample_total(text, "mqe_inline_acts_total") == 3.0
    assert sample_total(text, "mqe_keep_warm_acts_total") == 0.0  # another counter's samples are not counted
    assert sample_total(text, "mqe_inline_acts_created") > 0  # the family's other sample, only when asked for
