"""MicroBatcher and GoalCache without a model: batching, the wait rule, the one worker path, LRU eviction."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from mqe_client.protocol import ErrorCode, ProtocolError
from server.batching import MicroBatcher, PendingCounter
from server.goals import GoalCache


class FakeRuntime:
    """Adds observation and goal; records the batch sizes it was called with."""

    name = "fake"

    def __init__(self, delay: float = 0.0):
        self.calls: list[int] = []
        self.inputs: list[tuple[np.ndarray, np.ndarray]] = []
        self.delay = delay
        self.fail = False

    def act_batch(self, observations, goals):
        self.calls.append(len(observations))
        self.inputs.append((observations.copy(), goals.copy()))
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("device lost")
        return observations + goals, np.full(len(observations), 3.0, np.float32)

    def distance_or_none(self, value):
        return float(value)


def test_concurrent_requests_share_a_batch():
    pending = PendingCounter()
    batcher = MicroBatcher("test", max_wait_ms=50, max_batch=8, pending=pending)
    runtime = FakeRuntime(delay=0.05)
    try:
        busy = batcher.submit(runtime, np.zeros(2), np.zeros(2))  # keeps the worker busy 50 ms
        time.sleep(0.01)  # the worker has taken it alone
        futures = [batcher.submit(runtime, np.full(2, i), np.ones(2)) for i in range(5)]
        results = [f.result(5) for f in futures]
        busy.result(5)
    finally:
        batcher.close()
    assert runtime.calls == [1, 5]
    for i, r in enumerate(results):
        np.testing.assert_array_equal(r.action, np.full(2, i + 1))
        assert r.batch_size == 5 and r.distance == 3.0


def test_a_lone_request_does_not_wait_but_an_announced_one_is_awaited():
    pending = PendingCounter()
    batcher = MicroBatcher("test", max_wait_ms=200, max_batch=8, pending=pending)
    runtime = FakeRuntime()
    try:
        start = time.perf_counter()
        batcher.submit(runtime, np.zeros(1), np.zeros(1)).result(5)
        assert time.perf_counter() - start < 0.1  # nothing announced: no 200 ms wait
        pending.announce()
        first = batcher.submit(runtime, np.zeros(1), np.zeros(1))
        threading.Timer(0.03, lambda: (batcher.submit(runtime, np.ones(1), np.zeros(1)),
                                       pending.withdraw())).start()
        assert first.result(5).batch_size == 2
    finally:
        batcher.close()


def test_a_model_fault_reaches_every_waiter_and_the_worker_survives():
    class Broken(FakeRuntime):
        def act_batch(self, observations, goals):
            raise RuntimeError("device lost")

    batcher = MicroBatcher("test", max_wait_ms=0, max_batch=4)
    try:
        with pytest.raises(RuntimeError, match="device lost"):
            batcher.submit(Broken(), np.zeros(1), np.zeros(1)).result(5)
        assert batcher.submit(FakeRuntime(), np.zeros(1), np.ones(1)).result(5).action[0] == 1
    finally:
        batcher.close()


class ThreadRecordingRuntime(FakeRuntime):
    """Also records which thread ran each act."""

    def __init__(self, delay: float = 0.0):
        super().__init__(delay)
        self.threads: list[str] = []

    def act_batch(self, observations, goals):
        self.threads.append(threading.current_thread().name)
        return super().act_batch(observations, goals)


def test_every_request_lone_or_not_acts_on_the_devices_worker_and_nothing_acts_between_requests():
    pending = PendingCounter()
    batcher = MicroBatcher("dev", max_wait_ms=0, pending=pending)
    runtime = ThreadRecordingRuntime()
    try:
        pending.announce()  # as the app does before it parses the request
        lone = batcher.submit(runtime, np.full(2, 2.0), np.ones(2))
        pending.withdraw()
        result = lone.result(5)
        time.sleep(0.1)  # idle: the worker waits for the next request and runs nothing
        assert runtime.calls == [1]
        crowd = [batcher.submit(runtime, np.full(2, float(i)), np.zeros(2)) for i in range(3)]
        assert [f.result(5).action.tolist() for f in crowd] == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
    finally:
        batcher.close()
    np.testing.assert_array_equal(result.action, [3.0, 3.0])
    assert result.batch_size == 1 and result.distance == 3.0
    assert set(runtime.threads) == {"batcher-dev"}


def test_goal_cache_is_lru_bounded_and_per_policy():
    cache = GoalCache(max_entries=2)
    a = cache.put("p", "f", np.zeros(3))
    b = cache.put("p", "f", np.ones(3))
    cache.get(a, "p")  # a is now the most recent
    cache.put("p", "f", np.full(3, 2.0))  # evicts b
    with pytest.raises(ProtocolError) as info:
        cache.get(b, "p")
    assert info.value.code == ErrorCode.UNKNOWN_GOAL
    assert cache.get(a, "p")[0] == 0 and len(cache) == 2 and cache.evictions == 1
    with pytest.raises(ProtocolError) as info:
        cache.get(a, "other")
    assert info.value.code == ErrorCode.INVALID_VALUE
    assert cache.hits == 3 and cache.misses == 1
    with pytest.raises(ValueError):
        cache.get(a, "p")[0] = 5.0  # stored goals are read-only


def test_an_announced_request_is_withdrawn_once_whether_it_submits_or_fails():
    pending = PendingCounter()
    with pending.announced() as withdraw:
        with pending.announced():  # a second request, still parsing
            assert pending.expecting
        assert pending.expecting  # the first is still on its way
        withdraw()
        withdraw()  # the second call does nothing: no other request's announcement is spent
        assert not pending.expecting
        pending.announce()  # another request arrives while the first awaits its answer
    assert pending.expecting  # leaving the first request's block spent nothing more
    pending.withdraw()
    try:
        with pending.announced():
            raise ValueError("bad image")
    except ValueError:
        pass
    assert not pending.expecting
