"""The openpi websocket endpoint driven by the real openpi-client (its own environment, numpy < 2)."""

from __future__ import annotations

import fcntl
import json
import subprocess

import msgpack
import numpy as np
import pytest
from server_helpers import IMAGE_SIZE, REPO, TMP, running_server

from mqe_client.protocol import ErrorCode, ProtocolError
from server import openpi_ws
from server.runtime import PolicyRuntime

OPENPI_VENV = REPO / ".venv-openpi"
CLIENT_SCRIPT = REPO / "tests" / "server" / "openpi_client_script.py"


@pytest.fixture(scope="module")
def openpi_python():
    """The openpi-client environment's python, installed by scripts/install_openpi_client.sh if missing."""
    python = OPENPI_VENV / "bin" / "python"
    with open(REPO / ".venv-openpi.lock", "w") as lock:  # two test processes never install at once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not python.exists() or subprocess.run([python, "-c", "import openpi_client.websocket_client_policy"]).returncode:
            subprocess.run(["bash", str(REPO / "scripts" / "install_openpi_client.sh"), str(OPENPI_VENV)],
                           check=True, timeout=300)
    return python


def frame(seed: int, height: int, width: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def run_client(python, port: int, goal: np.ndarray, frames: np.ndarray, api_key: str | None = None) -> dict:
    inputs, outputs = TMP / f"openpi-in-{port}.npz", TMP / f"openpi-out-{port}.npz"
    np.savez(inputs, goal=goal, frames=frames)
    done = subprocess.run([python, CLIENT_SCRIPT, str(port), inputs, outputs, *([api_key] if api_key else [])],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(outputs) as f:
        return {k: f[k] for k in f.files}


def test_openpi_client_acts_like_the_runtime(openpi_python, live_server, image_ckpt):
    runtime = PolicyRuntime.load(image_ckpt, buckets=(1,))
    goal = frame(0, 100, 80)
    frames = np.stack([frame(i, 48, 64) for i in range(1, 4)])
    out = run_client(openpi_python, live_server.port, goal, frames)
    metadata = json.loads(str(out["metadata"]))
    assert metadata["default_policy"] == "img" and metadata["action_key"] == "actions"
    by_name = {p["name"]: p for p in metadata["policies"]}
    assert by_name["img"]["image"]["height"] == IMAGE_SIZE and by_name["img"]["fingerprint"] == runtime.fingerprint
    encoded_goal = runtime.encode_goal(goal)
    assert out["actions"].shape == (3, 1, 7) and out["actions"].dtype == np.float32
    for got, distance, image in zip(out["actions"], out["distances"], frames, strict=True):
        expected_action, expected_distance = runtime.act(image, encoded_goal)
        np.testing.assert_allclose(got[0], expected_action, rtol=1e-5, atol=1e-6)
        assert distance == pytest.approx(expected_distance, rel=1e-5)
    # the goal stays for the connection after a refused message
    np.testing.assert_allclose(out["after_error"][0], runtime.act(frames[0], encoded_goal)[0], rtol=1e-5, atol=1e-6)
    no_goal, float_image = json.loads(str(out["errors"]))
    assert f"{ErrorCode.MISSING_FIELD}: no goal yet: send 'goal/image'" in no_goal
    assert f"{ErrorCode.INVALID_IMAGE}: 'observation/image' must be an RGB uint8 array" in float_image


def test_token_as_openpi_api_key(openpi_python, image_ckpt):
    with running_server(["--policy", f"img={image_ckpt}", "--token", "s3cret-token"]) as server:
        out = run_client(openpi_python, server.port, frame(0, 32, 32), frame(1, 32, 32)[None], api_key="s3cret-token")
        assert out["actions"].shape == (1, 1, 7)
        refused = subprocess.run([openpi_python, CLIENT_SCRIPT, str(server.port), "-", "-", "wrong"],
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0 and "403" in refused.stderr


def _openpi_array(arr: np.ndarray, override: dict | None = None) -> dict:
    packed = {b"__ndarray__": True, b"data": arr.tobytes(), b"dtype": arr.dtype.str, b"shape": list(arr.shape)}
    return {**packed, **(override or {})}


def test_openpi_arrays_decode_with_bytes_keys_and_bad_ones_are_refused():
    image = frame(3, 4, 5)
    message = msgpack.packb({"observation/image": _openpi_array(image),
                             "step": {b"__npgeneric__": True, b"data": 3, b"dtype": "<i8"}})
    decoded = openpi_ws.unpack_openpi(message)
    np.testing.assert_array_equal(decoded["observation/image"], image)
    assert decoded["step"] == np.int64(3) and isinstance(decoded["step"], np.int64)
    for bad, says in [(_openpi_array(image, {b"dtype": "|O"}), "dtype '|O' is not allowed"),
                      (_openpi_array(image, {b"data": b"short"}), "array data has 5 bytes"),
                      (_openpi_array(image, {b"shape": [-1]}), "is not a list of sizes")]:
        with pytest.raises(ProtocolError, match=says):
            openpi_ws.unpack_openpi(msgpack.packb({"observation/image": bad}))
    # answers round-trip through openpi's own decoding rule (bytes keys)
    answer = msgpack.unpackb(openpi_ws.pack_openpi({"actions": np.ones((1, 7), np.float32)}))
    assert answer["actions"][b"__ndarray__"] and answer["actions"][b"shape"] == [1, 7]
