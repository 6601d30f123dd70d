"""The app in-process (TestClient): readiness during warm-up, load failures, policy resolution."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from fastapi.testclient import TestClient
from server_helpers import decoded

from mqe_client import protocol
from mqe_client.protocol import ErrorCode
from server.app import create_app
from server.settings import ServeSettings


def wait_ready(client: TestClient, timeout_s: float = 10.0) -> None:
    """Poll /readyz until the app is ready (the loader runs in its own thread)."""
    for _ in range(int(timeout_s / 0.05)):
        if client.get("/readyz").status_code == 200:
            return
        threading.Event().wait(0.05)


@pytest.fixture(scope="module")
def img_runtime(image_ckpt):
    """One loaded runtime of the tiny image checkpoint, shared by the apps of this module."""
    from server.runtime import PolicyRuntime

    return PolicyRuntime.load(image_ckpt, buckets=(1,), name="img")


def blocking_loader(release: threading.Event, runtimes: dict):
    def load(settings):
        release.wait(30)
        return runtimes
    return load


def loaded_app(settings: ServeSettings, runtimes: dict):
    """An app whose loader hands over `runtimes` at once."""
    return create_app(settings, lambda _settings: runtimes)


def image_app(image_ckpt, img_runtime, **settings):
    """The tiny image policy, served as "img" with `settings` beyond the tests' defaults."""
    return loaded_app(ServeSettings(policy=(f"img={image_ckpt}",), compilation_cache="", **settings),
                      {"img": img_runtime})


MSGPACK = {"Content-Type": protocol.CONTENT_TYPE}


def test_requests_during_warm_up_get_503_retryable(image_ckpt, img_runtime):
    release = threading.Event()
    app = create_app(ServeSettings(policy=(f"img={image_ckpt}",), compilation_cache=""),
                     blocking_loader(release, {"img": img_runtime}))
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        for reply in (client.get("/readyz"), client.get("/v1/metadata"),
                      client.post("/v1/act", content=protocol.packb({"image": b"x", "goal_id": "g"}),
                                  headers=MSGPACK)):
            assert reply.status_code == 503
            error = decoded(reply)["error"]
            assert error["code"] == ErrorCode.NOT_READY and error["retryable"] is True
        release.set()
        wait_ready(client)
        assert client.get("/readyz").status_code == 200
        image = np.zeros((32, 32, 3), np.uint8)
        reply = client.post("/v1/act", content=protocol.packb({"image": image, "goal_image": image}),
                            headers=MSGPACK)
        assert reply.status_code == 200
        np.testing.assert_allclose(decoded(reply)["action"], img_runtime.act(image, img_runtime.encode_goal(image))[0],
                                   rtol=1e-5, atol=1e-6)


def test_a_failed_load_is_reported_not_retryable():
    def failing(settings):
        raise FileNotFoundError("checkpoint vanished")

    app = create_app(ServeSettings(policy=("a=/nowhere",), compilation_cache=""), failing)
    with TestClient(app) as client:
        for _ in range(100):
            reply = client.get("/readyz")
            if "vanished" in reply.text:
                break
            threading.Event().wait(0.02)
        assert reply.status_code == 503 and "checkpoint vanished" in reply.json()["error"]["message"]


def test_several_policies_need_a_name(image_ckpt, img_runtime):
    settings = ServeSettings(policy=(f"a={image_ckpt}", f"b={image_ckpt}"), compilation_cache="")
    app = loaded_app(settings, {"a": img_runtime, "b": img_runtime})
    with TestClient(app) as client:
        wait_ready(client)
        image = np.zeros((32, 32, 3), np.uint8)
        reply = client.post("/v1/goals", content=protocol.packb({"image": image}),
                            headers=MSGPACK)
        assert reply.status_code == 422
        error = decoded(reply)["error"]
        assert error["code"] == ErrorCode.MISSING_FIELD and "'a', 'b'" in error["message"]
        reply = client.post("/v1/goals", content=protocol.packb({"image": image, "policy": "b"}),
                            headers=MSGPACK)
        assert reply.status_code == 200


def test_policies_load_with_the_encoders_and_convolutions_of_their_devices_platform(image_ckpt, monkeypatch):
    import server.runtime
    from server.app import load_runtimes

    settings = ServeSettings(policy=(f"img={image_ckpt}",), batch_buckets=(1,))
    cpu = load_runtimes(settings)["img"]
    assert (cpu.encoders, cpu.conv, cpu.host_io) == ("separate", "xla", False)  # the CPU's choices
    monkeypatch.setattr(server.runtime, "CPU_ENCODERS", "stacked")  # what load_runtimes asks follows the platform's
    monkeypatch.setattr(server.runtime, "OTHER_CONV", "matmul")
    other = load_runtimes(settings)["img"]
    assert (other.encoders, other.conv) == ("stacked", "matmul")


def request_counts(client: TestClient, endpoint: str) -> dict[str, float]:
    """mqe_requests_total of one endpoint, by status."""
    prefix = f'mqe_requests_total{{endpoint="{endpoint}",status="'
    return {line[len(prefix):].split('"')[0]: float(line.split()[-1])
            for line in client.get("/metrics").text.splitlines() if line.startswith(prefix)}


def test_every_answer_of_the_goal_and_act_routes_is_counted_by_status(image_ckpt, img_runtime):
    app = image_app(image_ckpt, img_runtime)
    image = np.zeros((32, 32, 3), np.uint8)
    with TestClient(app) as client:
        wait_ready(client)
        goal_id = decoded(client.post("/v1/goals", content=protocol.packb({"image": image}), headers=MSGPACK))["goal_id"]
        for _ in range(2):
            assert client.post("/v1/act", content=protocol.packb({"image": image, "goal_id": goal_id}),
                               headers=MSGPACK).status_code == 200
        assert client.post("/v1/act", content=b"{}", headers={"Content-Type": "application/json"}).status_code == 415
        assert client.post("/v1/act", content=protocol.packb({"image": image, "goal_id": "gone"}),
                           headers=MSGPACK).status_code == 404
        assert client.post("/v1/act", content=b"\xc1", headers=MSGPACK).status_code == 422
        assert decoded(client.get("/v1/act", headers=MSGPACK))["error"]["code"] == ErrorCode.METHOD_NOT_ALLOWED
        assert request_counts(client, "/v1/act") == {"200": 2, "404": 1, "405": 1, "415": 1, "422": 1}
        assert request_counts(client, "/v1/goals") == {"200": 1}


def test_a_fault_in_the_act_route_answers_500_internal_and_is_counted(image_ckpt, img_runtime, monkeypatch):
    app = image_app(image_ckpt, img_runtime)
    image = np.zeros((32, 32, 3), np.uint8)

    def broken_prepare(image):
        raise RuntimeError("a bug in preprocessing")

    with TestClient(app, raise_server_exceptions=False) as client:
        wait_ready(client)
        goal_id = decoded(client.post("/v1/goals", content=protocol.packb({"image": image}), headers=MSGPACK))["goal_id"]
        monkeypatch.setattr(img_runtime, "prepare", broken_prepare)
        answer = client.post("/v1/act", content=protocol.packb({"image": image, "goal_id": goal_id}), headers=MSGPACK)
        assert answer.status_code == 500
        error = decoded(answer)["error"]
        assert error["code"] == ErrorCode.INTERNAL and error["retryable"] and "RuntimeError" in error["message"]
        assert request_counts(client, "/v1/act") == {"500": 1}


def test_the_robots_posts_skip_the_middleware_stack_and_other_requests_do_not(image_ckpt, img_runtime):
    app = image_app(image_ckpt, img_runtime)
    image = np.zeros((32, 32, 3), np.uint8)
    with TestClient(app) as client:
        wait_ready(client)
        stack, through_stack = app.middleware_stack, []

        async def counting_stack(scope, receive, send):
            through_stack.append((scope["method"], scope["path"]))
            await stack(scope, receive, send)

        app.middleware_stack = counting_stack
        goal_id = decoded(client.post("/v1/goals", content=protocol.packb({"image": image}), headers=MSGPACK))["goal_id"]
        assert client.post("/v1/act", content=protocol.packb({"image": image, "goal_id": goal_id}),
                           headers=MSGPACK).status_code == 200
        assert client.get("/v1/act").status_code == 405
        assert client.get("/healthz").status_code == 200
        assert through_stack == [("GET", "/v1/act"), ("GET", "/healthz")]


def test_the_settings_reach_each_devices_worker(image_ckpt, img_runtime):
    settings = ServeSettings(policy=(f"img={image_ckpt}",), compilation_cache="", max_wait_ms=3,
                             batch_buckets=(1, 2, 8))
    app = loaded_app(settings, {"img": img_runtime})
    with TestClient(app) as client:
        wait_ready(client)
        batcher = app.state.server.batchers["img"]
        assert (batcher.max_wait_s, batcher.max_batch) == (0.003, 8)
        assert batcher.pending is app.state.server.pending


def test_every_request_acts_on_the_batch_worker_and_nothing_acts_between_requests(image_ckpt, img_runtime,
                                                                                  monkeypatch):
    image = np.random.default_rng(3).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    threads: list[str] = []
    act_batch = img_runtime.act_batch

    def recording_act_batch(observations, goals):
        threads.append(threading.current_thread().name)
        return act_batch(observations, goals)

    app = image_app(image_ckpt, img_runtime)
    with TestClient(app) as client:
        wait_ready(client)
        monkeypatch.setattr(img_runtime, "act_batch", recording_act_batch)
        goal_id = decoded(client.post("/v1/goals", content=protocol.packb({"image": image}), headers=MSGPACK))["goal_id"]
        answers = []
        for _ in range(3):
            threading.Event().wait(0.05)  # the requests come one by one, as from one robot
            answers.append(decoded(client.post("/v1/act", content=protocol.packb({"image": image, "goal_id": goal_id}),
                                               headers=MSGPACK)))
        threading.Event().wait(0.1)
        assert request_counts(client, "/v1/act") == {"200": 3}
        batches = [line for line in client.get("/metrics").text.splitlines()
                   if line.startswith('mqe_batch_size_count{policy="img"}')]
        assert float(batches[0].split()[-1]) == 3  # one batch of one per request
        assert not app.state.server.pending.expecting  # every request withdrawn
    assert len(threads) == 3 and all(t.startswith("batcher-") for t in threads)  # the worker's thread, not the loop's
    for answer in answers[1:]:
        np.testing.assert_array_equal(answer["action"], answers[0]["action"])
        assert answer["distance"] == answers[0]["distance"]
