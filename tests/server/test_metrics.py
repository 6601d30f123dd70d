"""server.metrics: the counters as /metrics renders them, read back by `sample_total`."""

from __future__ import annotations

from server.metrics import ServerMetrics, sample_total


def test_sample_total_sums_one_sample_over_its_label_sets_and_nothing_else():
    metrics = ServerMetrics()
    assert sample_total(metrics.render().decode(), "mqe_goals_uploaded_total") == 0.0  # none yet
    for policy in ("a", "a", "b"):
        metrics.goals_uploaded.labels(policy).inc()
    metrics.observe_batch("a", 4, 0.001)
    text = metrics.render().decode()
    assert sample_total(text, "mqe_goals_uploaded_total") == 3.0
    assert sample_total(text, "mqe_batch_size_sum") == 4.0  # another family's samples are not counted
    assert sample_total(text, "mqe_batch_size_count") == 1.0
    assert sample_total(text, "mqe_goals_uploaded_created") > 0  # the family's other sample, only when asked for
