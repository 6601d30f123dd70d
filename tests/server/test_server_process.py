"""The wire protocol v1 contract end to end, against `python -m server` on loopback."""

from __future__ import annotations

import concurrent.futures

import cv2
import httpx
import numpy as np
import pytest
from server_helpers import IMAGE_SIZE, STATE_DIM, decoded, post, running_server

from mqe_client import protocol
from mqe_client.protocol import ErrorCode
from mqe_model.policy import load_policy
from server.runtime import PolicyRuntime


@pytest.fixture(scope="module")
def client(live_server):
    with httpx.Client(base_url=live_server.url, timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
def image_runtime(image_ckpt):
    return PolicyRuntime.load(image_ckpt, buckets=(1,))


def frame(seed: int, height: int = 48, width: int = 64) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def test_probes_and_metadata(client, state_ckpt, image_ckpt):
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    meta = client.get("/v1/metadata").json()
    assert meta["schema_version"] == protocol.SCHEMA_VERSION and meta["default_policy"] == "img"
    by_name = {p["name"]: p for p in meta["policies"]}
    assert by_name["img"]["fingerprint"] == load_policy(image_ckpt).fingerprint
    assert by_name["state"]["fingerprint"] == load_policy(state_ckpt).fingerprint
    assert by_name["img"]["image"] == {"height": IMAGE_SIZE, "width": IMAGE_SIZE, "resize": "area"}
    assert by_name["state"]["image"] is None and by_name["state"]["step"] == 30
    assert by_name["img"]["action_dim"] == 7 and len(by_name["img"]["action_low"]) == 7
    assert by_name["state"]["algorithm"] == "mqe" and by_name["state"]["has_distance"]
    assert by_name["img"]["action_frame"] == by_name["state"]["action_frame"] == "measured"


def test_act_equals_the_runtime_in_process(client, image_runtime):
    goal_image = frame(0, 100, 80)
    reply = post(client, "/v1/goals", protocol.GoalRequest(goal_image).to_wire())
    assert reply.status_code == 200, reply.text
    goal_id = protocol.GoalResponse.from_wire(decoded(reply)).goal_id
    goal = image_runtime.encode_goal(goal_image)
    for seq, image in enumerate([frame(1), frame(2, 32, 32), frame(3, 480, 640)]):
        reply = post(client, "/v1/act", protocol.ActRequest(image, goal_id=goal_id, seq=seq,
                                                            episode_id="ep-1", step=seq).to_wire())
        assert reply.status_code == 200, reply.content
        answer = protocol.ActResponse.from_wire(decoded(reply))
        expected_action, expected_distance = image_runtime.act(image, goal)
        np.testing.assert_allclose(answer.action, expected_action, rtol=1e-5, atol=1e-6)
        assert answer.distance == pytest.approx(expected_distance, rel=1e-5)
        assert answer.seq == seq and answer.policy_fingerprint == image_runtime.fingerprint
        assert answer.action.shape == (7,) and answer.action.dtype == np.float32
        t = answer.timing
        assert 0 <= t.decode_ms <= t.total_ms and 0 < t.infer_ms <= t.total_ms


def test_jpeg_png_bytes_and_inline_goal(client, image_runtime):
    image = frame(4, 64, 64)
    png = cv2.imencode(".png", image[:, :, ::-1])[1].tobytes()  # PNG is lossless: same pixels
    jpeg = cv2.imencode(".jpg", image[:, :, ::-1])[1].tobytes()
    by_array = decoded(post(client, "/v1/act", {"image": image, "goal_image": image}))
    by_png = decoded(post(client, "/v1/act", {"image": png, "goal_image": png}))
    np.testing.assert_allclose(by_png["action"], by_array["action"], rtol=1e-5, atol=1e-6)
    by_jpeg = post(client, "/v1/act", {"image": jpeg, "goal_image": image})
    assert by_jpeg.status_code == 200
    goal = image_runtime.encode_goal(image)
    expected, _ = image_runtime.act(jpeg, goal)
    np.testing.assert_allclose(decoded(by_jpeg)["action"], expected, rtol=1e-5, atol=1e-6)


def test_state_policy_takes_a_float_vector(client):
    state = np.arange(STATE_DIM, dtype=np.float32)
    goal_id = decoded(post(client, "/v1/goals", {"image": state[::-1].copy(), "policy": "state"}))["goal_id"]
    answer = decoded(post(client, "/v1/act", {"image": state, "goal_id": goal_id, "policy": "state"}))
    assert answer["action"].shape == (3,) and answer["distance"] is not None and answer["distance"] >= 0
    bad = state.copy()
    bad[2] = np.nan
    reply = post(client, "/v1/act", {"image": bad, "goal_id": goal_id, "policy": "state"})
    assert reply.status_code == 422 and decoded(reply)["error"]["code"] == ErrorCode.INVALID_VALUE
    # A goal uploaded for one policy is not usable by another.
    reply = post(client, "/v1/act", {"image": frame(0), "goal_id": goal_id, "policy": "img"})
    assert reply.status_code == 422


def test_goal_cache_hits_are_counted(client):
    goal_id = decoded(post(client, "/v1/goals", {"image": frame(5)}))["goal_id"]
    before = client.get("/metrics").text
    for _ in range(3):
        assert post(client, "/v1/act", {"image": frame(6), "goal_id": goal_id}).status_code == 200
    after = client.get("/metrics").text

    def hits(text: str) -> float:
        line = [x for x in text.splitlines() if x.startswith('mqe_goal_cache_lookups_total{result="hit"}')]
        return float(line[0].split()[-1]) if line else 0.0

    assert hits(after) - hits(before) == 3
    for name in ("mqe_stage_seconds_bucket", "mqe_batch_size_bucket", "mqe_requests_total"):
        assert name in after


def test_several_clients_at_once(live_server, image_runtime):
    goal_image = frame(7)
    goal = image_runtime.encode_goal(goal_image)

    def robot(index: int) -> list[tuple[np.ndarray, np.ndarray]]:
        with httpx.Client(base_url=live_server.url, timeout=30) as c:
            goal_id = decoded(post(c, "/v1/goals", {"image": goal_image}))["goal_id"]
            out = []
            for step in range(15):
                image = frame(100 * index + step)
                reply = post(c, "/v1/act", {"image": image, "goal_id": goal_id,
                                            "episode_id": f"robot-{index}", "step": step})
                assert reply.status_code == 200, reply.content
                out.append((decoded(reply)["action"], image))
            return out

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = [r for rs in pool.map(robot, range(8)) for r in rs]
    assert len(results) == 120
    for action, image in results[::10]:  # batched answers equal the single-request answers
        np.testing.assert_allclose(action, image_runtime.act(image, goal)[0], rtol=1e-4, atol=1e-5)


BAD_INPUTS = {
    "garbage bytes": (b"\xc1\xff\x00garbage", None, 422, ErrorCode.MALFORMED),
    "not a map": (protocol.packb([1, 2, 3]), None, 422, ErrorCode.MALFORMED),
    "json body": (b'{"image": 1}', "application/json", 415, ErrorCode.UNSUPPORTED_MEDIA_TYPE),
    "no content type": (protocol.packb({"image": 1}), "", 415, ErrorCode.UNSUPPORTED_MEDIA_TYPE),
    "grey image": ({"image": np.zeros((8, 8), np.uint8), "goal_id": "g"}, None, 422, ErrorCode.INVALID_IMAGE),
    "rgba image": ({"image": np.zeros((8, 8, 4), np.uint8), "goal_id": "g"}, None, 422, ErrorCode.INVALID_IMAGE),
    "float image": ({"image": np.zeros((8, 8, 3), np.float32), "goal_id": "g"}, None, 422, ErrorCode.INVALID_IMAGE),
    "zero-sized image": ({"image": np.zeros((0, 8, 3), np.uint8), "goal_id": "g"}, None, 422, ErrorCode.INVALID_IMAGE),
    "corrupt jpeg": ({"image": b"\xff\xd8\xff\xe0" + b"\x00" * 100, "goal_image": np.zeros((8, 8, 3), np.uint8)},
                     None, 422, ErrorCode.INVALID_IMAGE),
    "state vector for an image policy": ({"image": np.zeros(6, np.float32), "goal_id": "g"}, None, 422,
                                         ErrorCode.INVALID_IMAGE),
    "wrong state size": ({"image": np.zeros(5, np.float32), "goal_image": np.zeros(5, np.float32),
                          "policy": "state"}, None, 422, ErrorCode.INVALID_VALUE),
    "unknown policy": ({"image": np.zeros((8, 8, 3), np.uint8), "goal_id": "g", "policy": "nope"}, None, 404,
                       ErrorCode.UNKNOWN_POLICY),
    "unknown goal": ({"image": np.zeros((8, 8, 3), np.uint8), "goal_id": "nope"}, None, 404, ErrorCode.UNKNOWN_GOAL),
    "missing image": ({"goal_id": "g"}, None, 422, ErrorCode.MISSING_FIELD),
    "missing goal": ({"image": np.zeros((8, 8, 3), np.uint8)}, None, 422, ErrorCode.MISSING_FIELD),
    "seq not an int": ({"image": np.zeros((8, 8, 3), np.uint8), "goal_id": "g", "seq": "x"}, None, 422,
                       ErrorCode.MALFORMED),
    "bad dtype": ({"image": {"__ndarray__": True, "data": b"", "dtype": "O", "shape": [0]}, "goal_id": "g"},
                  None, 422, ErrorCode.MALFORMED),
    "body over the limit": (b"\x00" * (2**20 + 1), None, 413, ErrorCode.PAYLOAD_TOO_LARGE),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_is_a_clear_4xx(client, name):
    body, content_type, status, code = BAD_INPUTS[name]
    content = body if isinstance(body, bytes) else protocol.packb(body)
    headers = {"Content-Type": protocol.CONTENT_TYPE if content_type is None else content_type}
    reply = client.post("/v1/act", content=content, headers=headers)
    assert reply.status_code == status, reply.content
    error = decoded(reply)["error"]
    assert error["code"] == code and error["message"] and error["retryable"] is False


def test_enormous_images_and_streamed_bodies_are_refused(client):
    huge = cv2.imencode(".jpg", np.zeros((4200, 4200, 3), np.uint8))[1].tobytes()
    reply = post(client, "/v1/goals", {"image": huge})
    assert reply.status_code == 422 and decoded(reply)["error"]["code"] == ErrorCode.INVALID_IMAGE

    def chunks():  # no Content-Length: the limit is enforced while streaming
        for _ in range(20):
            yield b"\x00" * 65536

    reply = client.post("/v1/act", content=chunks(), headers={"Content-Type": protocol.CONTENT_TYPE})
    assert reply.status_code == 413
    assert client.get("/v1/nothing").status_code == 404
    assert client.get("/v1/act").status_code == 405


def test_restart_forgets_goals_and_token_is_checked(image_ckpt, live_server):
    with httpx.Client(base_url=live_server.url, timeout=30) as c:
        old_goal = decoded(post(c, "/v1/goals", {"image": frame(8)}))["goal_id"]
    token = "s3cret-token-for-tests"
    with running_server(["--policy", f"img={image_ckpt}"], env={"MQE_SERVER_TOKEN": token}) as server, \
            httpx.Client(base_url=server.url, timeout=30) as c:
        body = {"image": frame(9), "goal_id": old_goal}
        assert post(c, "/v1/act", body).status_code == 401
        assert post(c, "/v1/act", body, {"Authorization": "Bearer wrong-token"}).status_code == 401
        assert c.get("/v1/metadata").status_code == 401
        assert c.get("/healthz").status_code == 200 and c.get("/readyz").status_code == 200
        auth = {"Authorization": f"Bearer {token}"}
        reply = post(c, "/v1/act", body, auth)
        assert reply.status_code == 404 and decoded(reply)["error"]["code"] == ErrorCode.UNKNOWN_GOAL
        goal_id = decoded(post(c, "/v1/goals", {"image": frame(8)}, auth))["goal_id"]
        assert post(c, "/v1/act", {"image": frame(9), "goal_id": goal_id}, auth).status_code == 200
