"""Prometheus metrics of one app (its own registry, so several apps in one process never clash)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

# Milliseconds-scale buckets (in seconds): a GPU act is ~1 ms, a CPU ResNet-34 ~25 ms.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03,
                   0.04, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)
BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServerMetrics:
    """The server's counters and histograms."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._children: dict[tuple, Any] = {}  # see child()
        r = self.registry
        self.requests = Counter("mqe_requests", "HTTP requests by endpoint and status",
                                ["endpoint", "status"], registry=r)
        self.stage_seconds = Histogram(
            "mqe_stage_seconds", "Time per request stage: decode (parse + preprocess), queue "
            "(waiting for a micro-batch), compute (the batch's model call), total (server side)",
            ["policy", "stage"], buckets=LATENCY_BUCKETS, registry=r)
        self.batch_size = Histogram("mqe_batch_size", "Requests per model call", ["policy"],
                                    buckets=BATCH_BUCKETS, registry=r)
        self.goal_cache = Counter("mqe_goal_cache_lookups", "goal_id lookups by result",
                                  ["result"], registry=r)
        self.goal_cache_entries = Gauge("mqe_goal_cache_entries", "Goals in the cache", registry=r)
        self.goals_uploaded = Counter("mqe_goals_uploaded", "Goals uploaded", ["policy"], registry=r)
        self.ready = Gauge("mqe_ready", "1 once every policy is loaded and warmed", registry=r)
        self.warmup_seconds = Gauge("mqe_warmup_seconds", "Compile + warm-up time per policy",
                                    ["policy"], registry=r)

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, looked up once: `labels()` takes a lock and builds its key on
        every call, six times per /v1/act."""
        key = (metric, labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)  # a race only looks it up twice
        return found

    def observe_batch(self, policy: str, size: int, seconds: float) -> None:
        """Record one model call (the batcher's hook)."""
        self.batch_size.labels(policy).observe(size)

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)


def sample_total(text: str, sample: str) -> float:
    """The sum over every label set of one sample (e.g. `mqe_batch_size_count`) in a /metrics text,
    as the benchmarks read a server's counters; 0 where the server has none yet."""
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples if s.name == sample)
