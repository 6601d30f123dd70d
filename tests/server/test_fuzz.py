"""Fuzz a real server on loopback: random and mutated payloads never get a 5xx nor crash it."""

from __future__ import annotations

import httpx
import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqe_client import protocol

FUZZ = settings(max_examples=400, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def client(live_server):
    with httpx.Client(base_url=live_server.url, timeout=30) as c:
        yield c
    assert live_server.alive()


def check(client: httpx.Client, path: str, content: bytes, content_type: str = protocol.CONTENT_TYPE) -> None:
    reply = client.post(path, content=content, headers={"Content-Type": content_type})
    assert reply.status_code < 500, (reply.status_code, reply.content[:300])
    if reply.status_code >= 400:  # every error is a well-formed ErrorBody
        body = protocol.unpackb(reply.content) if reply.headers["content-type"].startswith(
            protocol.CONTENT_TYPE) else reply.json()
        assert body["error"]["code"] and body["error"]["message"]


def raw_array(dtype: str, shape: list, data: bytes) -> dict:
    return {"__ndarray__": True, "dtype": dtype, "shape": shape, "data": data}


arrays = st.one_of(
    st.builds(lambda h, w, c, dtype: np.zeros((h, w, c), dtype),
              st.integers(0, 70), st.integers(0, 70), st.integers(0, 5),
              st.sampled_from(["uint8", "float32", "int16", "float64", "bool"])),
    st.builds(lambda n, fill: np.full(n, fill, np.float32),
              st.integers(0, 10), st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32))),
    st.builds(raw_array, st.sampled_from(["|u1", "<f4", "O", "<U4", ">f8", "|V8", 7]),
              st.one_of(st.lists(st.integers(-3, 2**40), max_size=4), st.integers(), st.text(max_size=3)),
              st.binary(max_size=64)),
    st.binary(max_size=256),
    st.builds(lambda b: b"\xff\xd8\xff\xe0" + b, st.binary(max_size=256)),  # JPEG header, junk body
    st.builds(lambda b: b"\x89PNG\r\n\x1a\n" + b, st.binary(max_size=256)),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=True),
                    st.text(max_size=20), st.binary(max_size=20), st.lists(st.integers(), max_size=3))
field_values = st.one_of(arrays, scalars)
FIELDS = ["image", "goal_id", "goal_image", "policy", "episode_id", "step", "seq"]


def valid_act() -> dict:
    image = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    return {"image": image, "goal_image": image, "policy": "img", "episode_id": "fuzz", "step": 1, "seq": 2}


@FUZZ
@given(data=st.binary(max_size=512), path=st.sampled_from(["/v1/act", "/v1/goals"]))
def test_random_bytes(client, data, path):
    check(client, path, data)


@FUZZ
@given(drop=st.sets(st.sampled_from(FIELDS)), changes=st.dictionaries(st.sampled_from(FIELDS), field_values,
                                                                     max_size=3),
       path=st.sampled_from(["/v1/act", "/v1/goals"]))
def test_mutated_valid_payloads(client, drop, changes, path):
    body = {k: v for k, v in valid_act().items() if k not in drop} | changes
    try:
        content = msgpack.packb(body, default=lambda o: protocol._encode_default(o)
                                if isinstance(o, np.ndarray) and o.dtype.str in protocol.ALLOWED_DTYPES
                                else o.tolist() if isinstance(o, np.ndarray) else o, use_bin_type=True)
    except (TypeError, ValueError, OverflowError):
        return  # not encodable as MessagePack at all: nothing to send
    check(client, path, content)


@FUZZ
@given(cut=st.integers(0, 4000), flip=st.integers(0, 4000), byte=st.integers(0, 255),
       content_type=st.sampled_from([protocol.CONTENT_TYPE, "application/json", "text/plain", "",
                                     "application/msgpack; charset=binary", "multipart/form-data"]))
def test_truncated_and_flipped_bodies(client, cut, flip, byte, content_type):
    content = bytearray(protocol.packb(valid_act()))
    if flip < len(content):
        content[flip] = byte
    check(client, "/v1/act", bytes(content[: len(content) - cut % len(content)]), content_type)
