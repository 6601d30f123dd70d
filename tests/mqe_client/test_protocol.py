import subprocess
import sys

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqe_client import protocol as p

DTYPES = ["bool", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float16", "float32", "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_array_round_trip_for_every_dtype(dtype):
    rng = np.random.default_rng(0)
    arr = (rng.normal(size=(2, 3, 4)) * 10).astype(dtype)
    back = p.unpackb(p.packb({"a": arr}))["a"]
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)


def test_non_contiguous_and_empty_arrays():
    arr = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
    np.testing.assert_array_equal(p.unpackb(p.packb(arr)), arr)
    empty = np.zeros((0, 3), np.uint8)
    assert p.unpackb(p.packb(empty)).shape == (0, 3)


def test_object_arrays_are_never_encoded():
    with pytest.raises(TypeError, match="numeric dtype"):
        p.packb(np.array([object()], dtype=object))


def test_messages_round_trip():
    image = np.zeros((4, 5, 3), np.uint8)
    goal = p.GoalRequest(image=image, policy="mqe")
    assert p.GoalRequest.from_wire(p.unpackb(p.packb(goal.to_wire()))).policy == "mqe"
    assert p.GoalResponse.from_wire(p.unpackb(p.packb(p.GoalResponse("g1").to_wire()))).goal_id == "g1"
    act = p.ActRequest(image=b"\x89PNG...", goal_id="g1", episode_id="e", step=3, seq=7)
    back = p.ActRequest.from_wire(p.unpackb(p.packb(act.to_wire())))
    assert (back.image, back.goal_id, back.step, back.seq, back.goal_image) == (b"\x89PNG...", "g1", 3, 7, None)
    reply = p.ActResponse(np.arange(7, dtype=np.float32), 12.5, 7, "abc", p.Timing(0.1, 0.2, 0.4))
    got = p.ActResponse.from_wire(p.unpackb(p.packb(reply.to_wire())))
    np.testing.assert_array_equal(got.action, reply.action)
    assert (got.distance, got.seq, got.policy_fingerprint, got.timing) == (12.5, 7, "abc", reply.timing)
    null_distance = p.ActResponse(np.zeros(7, np.float32), None, None, "f", p.Timing(0, 0, 0))
    assert p.ActResponse.from_wire(p.unpackb(p.packb(null_distance.to_wire()))).distance is None
    err = p.ErrorBody(p.ErrorCode.UNKNOWN_GOAL, "upload it again", retryable=False)
    assert p.ErrorBody.from_wire(p.unpackb(p.packb(err.to_wire()))) == err


@pytest.mark.parametrize(
    "body, code",
    [
        ({"image": np.zeros((4, 4), np.uint8), "goal_id": "g"}, p.ErrorCode.INVALID_IMAGE),
        ({"image": np.zeros((4, 4, 3), np.float32), "goal_id": "g"}, p.ErrorCode.INVALID_IMAGE),
        ({"image": np.zeros((0, 4, 3), np.uint8), "goal_id": "g"}, p.ErrorCode.INVALID_IMAGE),
        ({"image": b"", "goal_id": "g"}, p.ErrorCode.INVALID_IMAGE),
        ({"image": "text", "goal_id": "g"}, p.ErrorCode.INVALID_IMAGE),
        ({"goal_id": "g"}, p.ErrorCode.MISSING_FIELD),
        ({"image": b"x"}, p.ErrorCode.MISSING_FIELD),
        ({"image": b"x", "goal_id": 5}, p.ErrorCode.MALFORMED),
        ({"image": b"x", "goal_id": "g", "seq": 1.5}, p.ErrorCode.MALFORMED),
        ({"image": b"x", "goal_id": "g", "step": True}, p.ErrorCode.MALFORMED),
        ([1, 2], p.ErrorCode.MALFORMED),
    ],
)
def test_bad_act_requests_name_the_problem(body, code):
    with pytest.raises(p.ProtocolError) as info:
        p.ActRequest.from_wire(p.unpackb(p.packb(body)))
    assert info.value.code == code


def test_tampered_arrays_are_rejected():
    good = msgpack.unpackb(p.packb(np.zeros(4, np.float32)), raw=False)
    for change in ({"dtype": "|O"}, {"dtype": "<f4", "shape": [5]}, {"shape": "x"}, {"data": "str"}, {"shape": [-1]}):
        with pytest.raises(p.ProtocolError):
            p.unpackb(msgpack.packb({**good, **change}, use_bin_type=True))


def test_non_finite_action_is_not_a_protocol_error_but_garbage_is():
    with pytest.raises(p.ProtocolError, match="MessagePack"):
        p.unpackb(b"\xc1\xff\x00garbage")
    with pytest.raises(p.ProtocolError) as info:
        p.unpackb(b"x" * 100, max_size=10)
    assert info.value.code == p.ErrorCode.PAYLOAD_TOO_LARGE


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise_anything_but_protocol_errors(data):
    try:
        body = p.unpackb(data)
        p.ActRequest.from_wire(body)
    except p.ProtocolError:
        pass


def test_protocol_imports_no_heavy_stack():
    code = "import sys, mqe_client.protocol; bad = [m for m in ('jax', 'flax', 'fastapi', 'mqe_model') if m in sys.modules]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
