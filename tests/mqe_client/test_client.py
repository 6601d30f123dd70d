"""The server client: metadata checks, token, goal re-upload, backoff, deadlines; no jax or fastapi."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from mqe_client.client import MetadataMismatch, PolicyClient, ServerError, check_metadata
from mqe_client.mock_server import FINGERPRINT, make_metadata, serve
from mqe_client.protocol import ErrorCode


@pytest.fixture
def inproc_server():
    """Factory: a mock server in a thread of this process (port 0); shut down afterwards."""
    servers = []

    def make(**kwargs):
        srv = serve(port=0, **kwargs)
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        servers.append(srv)
        return srv, f"http://127.0.0.1:{srv.server_address[1]}"

    yield make
    for srv in servers:
        srv.shutdown()
        srv.server_close()


IMAGE = np.zeros((128, 128, 3), np.uint8)
WIDOWX_ACTIONS = ("dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper")


def test_client_never_imports_the_training_or_server_stack():
    code = ("import sys, robot_client.run, robot_client.loop, robot_client.robots.widowx, robot_client.camera, "
            "robot_client.records, mqe_client.client, mqe_client.mock_server, mqe_client.images; "
            "bad = [m for m in ('jax', 'flax', 'fastapi', 'mqe_model') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_check_metadata_accepts_a_bridge_image_policy():
    info = check_metadata(make_metadata(image_size=128), None, WIDOWX_ACTIONS)
    assert info.name == "mock" and info.image_size == (128, 128) and info.fingerprint == FINGERPRINT
    meta = make_metadata()
    meta["policies"][0]["image"] = {"height": 96, "width": 128, "resize": "area"}
    assert check_metadata(meta, "mock", WIDOWX_ACTIONS).image_size == (96, 128)


def with_image(image) -> dict:
    meta = make_metadata()
    meta["policies"][0]["image"] = image
    return meta


@pytest.mark.parametrize(("meta", "policy", "message"), [
    (make_metadata(schema_version=2), None, "protocol version 2"),
    (make_metadata(action_dim=6), None, "action_dim 6"),
    (make_metadata(image_size=None), None, "state-based"),
    (with_image({"height": 128, "width": 128, "resize": "bilinear"}), None, "resize 'bilinear'"),
    (with_image({"height": 0, "width": 128}), None, "positive integer height and width"),
    (with_image([128, 128]), None, "is not"),
    (make_metadata(), "gcbc", "unknown policy 'gcbc'"),
    ({"schema_version": 1, "policies": []}, None, "no policy"),
    ({"schema_version": 1, "policies": make_metadata()["policies"] + make_metadata(name="b")["policies"]},
     None, "choose one with --policy"),
    ("<html>", None, "not a metadata document"),
])
def test_check_metadata_refuses_what_the_robot_cannot_drive(meta, policy, message):
    with pytest.raises(MetadataMismatch, match=message):
        check_metadata(meta, policy, WIDOWX_ACTIONS)


def test_token_is_sent_and_required(inproc_server):
    _, url = inproc_server(token="s3cret")
    with PolicyClient(url, token=None) as client, pytest.raises(ServerError) as e:
        client.metadata()
    assert e.value.code == ErrorCode.UNAUTHORIZED
    with PolicyClient(url, token="s3cret") as client:
        assert client.metadata()["schema_version"] == 1
        client.set_goal(IMAGE, "mock")
        assert client.act(IMAGE, seq=1, step=0, episode_id="e", timeout_s=1.0).response.seq == 1


def test_unknown_goal_reuploads_the_goal_once(inproc_server):
    srv, url = inproc_server()
    with PolicyClient(url) as client:
        client.set_goal(IMAGE, "mock")
        first = client.goal_id
        srv.goals.clear()  # what a server restart does to the goal cache
        result = client.act(IMAGE, seq=5, step=0, episode_id="e", timeout_s=1.0)
        assert result.goal_reuploaded and client.goal_uploads == 2 and client.goal_id != first
        assert result.response.seq == 5 and result.response.action.shape == (7,)
        assert not client.act(IMAGE, seq=6, step=1, episode_id="e", timeout_s=1.0).goal_reuploaded


def test_unreachable_server_backs_off_exponentially_then_recovers(mock_server):
    server = mock_server()
    with PolicyClient(server.url, backoff_initial_s=0.05, backoff_max_s=0.2) as client:
        client.set_goal(IMAGE, "mock")
        server.kill()
        with pytest.raises(ServerError) as e:
            client.act(IMAGE, 1, 0, "e", timeout_s=0.2)
        assert e.value.code == "unreachable"
        with pytest.raises(ServerError) as e:  # no request at all while backing off
            client.act(IMAGE, 2, 1, "e", timeout_s=0.2)
        assert e.value.code == "backoff"
        delays = []
        for _ in range(4):
            time.sleep(client._retry_at - time.monotonic() + 0.001)
            with pytest.raises(ServerError):
                client.act(IMAGE, 3, 2, "e", timeout_s=0.2)
            delays.append(client._backoff_s)
        assert delays == [0.1, 0.2, 0.2, 0.2]  # doubled, then capped
        server.start()
        time.sleep(max(0.0, client._retry_at - time.monotonic()) + 0.001)
        assert client.act(IMAGE, 4, 3, "e", timeout_s=1.0).goal_reuploaded  # a new process: goal re-sent
        assert client._backoff_s == 0.0


def test_a_slow_server_cannot_hold_the_caller_past_its_deadline(inproc_server):
    _, url = inproc_server(mode="late", delay_s=1.0)
    with PolicyClient(url, timeout_s=0.1) as client:
        client.set_goal(IMAGE, "mock")
        start = time.monotonic()
        future = client.act_async(IMAGE, 1, 0, "e", timeout_s=0.1)
        with pytest.raises(ServerError) as e:
            future.result(timeout=2.0)
        assert e.value.code == "timeout" and time.monotonic() - start < 0.5


def test_malformed_answers_are_errors_not_actions(inproc_server):
    _, url = inproc_server(mode="wrong_dim")
    with PolicyClient(url) as client:
        client.set_goal(IMAGE, "mock")
        result = client.act(IMAGE, 1, 0, "e", timeout_s=1.0)
        assert result.response.action.shape == (6,)  # the protocol allows it; the loop refuses it


def test_one_keep_alive_connection_is_reused_and_one_the_server_closed_is_replaced(inproc_server):
    srv, url = inproc_server()
    accepted = []
    get_request = srv.get_request

    def counting_get_request():
        sock, address = get_request()
        accepted.append(sock)
        return sock, address

    srv.get_request = counting_get_request
    with PolicyClient(url) as client:
        client.set_goal(IMAGE, "mock")
        for step in range(5):
            client.act(IMAGE, step, step, "e", timeout_s=1.0)
        assert len(accepted) == 1
        accepted[0].shutdown(socket.SHUT_RDWR)  # what a keep-alive timeout or a restart does
        time.sleep(0.05)
        assert client.act(IMAGE, 9, 9, "e", timeout_s=1.0).response.seq == 9  # not an error
        assert len(accepted) == 2


def test_a_server_url_without_scheme_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="http://HOST:PORT"):
        PolicyClient("127.0.0.1:8000")


def test_a_proxy_in_the_environment_is_not_used(inproc_server, monkeypatch):
    _, url = inproc_server()
    for name in ("http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://10.255.255.1:9")  # nothing answers there
    with PolicyClient(url) as client:
        client.set_goal(IMAGE, "mock")
        assert client.act(IMAGE, 1, 0, "e", timeout_s=1.0).response.seq == 1
