"""PolicyRuntime: buckets and padding, preprocessing from the checkpoint, input checks."""

from __future__ import annotations

import cv2
import jax
import numpy as np
import pytest

from mqe_client.images import preprocess_image
from mqe_client.protocol import ErrorCode, ProtocolError
from server.runtime import MAX_PIXELS, PolicyRuntime, conv_on, decode_image_bytes, encoders_on


@pytest.fixture(scope="module")
def runtime(image_ckpt):
    return PolicyRuntime.load(image_ckpt, buckets=(1, 2, 4), name="img")


@pytest.fixture(scope="module")
def state_runtime(state_ckpt):
    return PolicyRuntime.load(state_ckpt, buckets=(1, 4), name="state")


def images(n: int, size: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def codes_of(runtime, goals: np.ndarray) -> np.ndarray:
    return np.stack([runtime.encode_goal(g, preprocessed=True) for g in goals])


def test_batches_are_padded_to_buckets_and_split_beyond_them(runtime):
    obs, goals = images(7), images(7, seed=1)
    actions, distances = runtime.act_batch(obs, codes_of(runtime, goals))  # 4 + 3 (padded to 4)
    assert actions.shape == (7, 7) and distances.shape == (7,)
    # the goal codes computed once per goal give what the whole network gives on the raw goals
    reference = jax.jit(runtime.policy.act_fn)(runtime.policy.params, obs, goals)
    np.testing.assert_allclose(actions, reference[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(distances, reference[1], rtol=1e-5, atol=1e-6)
    for i in (0, 5):
        single, distance = runtime.act(obs[i], runtime.encode_goal(goals[i]))
        np.testing.assert_allclose(single, actions[i], rtol=1e-5, atol=1e-6)
        assert distance == pytest.approx(float(distances[i]), rel=1e-5)
    assert runtime.bucket_for(3) == 4 and runtime.max_batch == 4


def test_actions_are_in_robot_units(runtime):
    actions, _ = runtime.act_batch(images(4), codes_of(runtime, images(4, seed=2)))
    low, high = np.asarray(runtime.policy.action_stats.low), np.asarray(runtime.policy.action_stats.high)
    assert np.all(actions >= low - 1e-6) and np.all(actions <= high + 1e-6)


def test_images_are_resized_with_the_training_function(runtime):
    big = images(1, 128, seed=3)[0]
    prepared = runtime.prepare(big)
    np.testing.assert_array_equal(prepared, preprocess_image(big, 32, 32, "area"))
    png = cv2.imencode(".png", big[:, :, ::-1])[1].tobytes()
    np.testing.assert_array_equal(runtime.prepare(png), prepared)  # BGR -> RGB handled


@pytest.mark.parametrize("value, code", [
    (np.zeros((8, 8, 3), np.float32), ErrorCode.INVALID_IMAGE),
    (np.zeros((8, 8), np.uint8), ErrorCode.INVALID_IMAGE),
    (np.zeros((0, 8, 3), np.uint8), ErrorCode.INVALID_IMAGE),
    (b"not an image", ErrorCode.INVALID_IMAGE),
    ("text", ErrorCode.INVALID_IMAGE),
])
def test_bad_images_are_protocol_errors(runtime, value, code):
    with pytest.raises(ProtocolError) as info:
        runtime.prepare(value)
    assert info.value.code == code


def test_pixel_limit(runtime):
    big = cv2.imencode(".png", np.zeros((300, 300, 3), np.uint8))[1].tobytes()
    with pytest.raises(ProtocolError, match="over 10000 pixels"):
        decode_image_bytes(big, max_pixels=10_000)
    assert MAX_PIXELS == 4096 * 4096
    wide = np.lib.stride_tricks.as_strided(np.zeros(3, np.uint8), (1, MAX_PIXELS + 1, 3), (0, 0, 1))  # no memory
    with pytest.raises(ProtocolError, match=f"over {MAX_PIXELS} pixels") as info:
        runtime.prepare(wide)
    assert info.value.code == ErrorCode.INVALID_IMAGE


def test_mqe_goal_codes_hold_psi_of_every_head_then_the_actor_goal_features(runtime):
    config = runtime.policy.config
    goal = images(1, seed=4)[0]
    codes = runtime.encode_goal(goal)
    params = runtime.policy.params
    from mqe_model.agents import mqe
    from mqe_model.networks.mqe import Critic, encode_actor_goals

    psi = mqe.make_critic(config).apply({"params": params["critic"]}, goal[None], method=Critic.psi)
    features = encode_actor_goals(params["actor"], goal[None], config.encoder)
    assert codes.dtype == np.float32 and codes.shape == (config.num_heads * config.latent_dim + features.shape[-1],)
    # The runtime's compiled function and this eager reference sum the convolutions in different
    # orders; on some CPUs that moves float32 values of ~0.1 by a few 1e-6.
    np.testing.assert_allclose(codes[:config.num_heads * config.latent_dim], np.asarray(psi)[:, 0].ravel(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(codes[config.num_heads * config.latent_dim:], np.asarray(features)[0], rtol=1e-4, atol=1e-5)


def test_state_policy(state_runtime):
    state = np.linspace(-1, 1, 6, dtype=np.float32)
    action, distance = state_runtime.act(state, state_runtime.encode_goal(state[::-1].copy()))
    assert action.shape == (3,) and distance is not None and distance >= 0
    reference = state_runtime.policy.act_fn(state_runtime.policy.params, state[None], state[::-1].copy()[None])
    np.testing.assert_allclose(action, reference[0][0], rtol=1e-5, atol=1e-6)
    assert distance == pytest.approx(float(reference[1][0]), rel=1e-5)
    for bad in (np.zeros(5, np.float32), np.full(6, np.inf, np.float32), np.zeros((6, 1), np.float32)):
        with pytest.raises(ProtocolError) as info:
            state_runtime.prepare(bad)
        assert info.value.code == ErrorCode.INVALID_VALUE
    assert state_runtime.metadata["image"] is None and state_runtime.metadata["observation"]["shape"] == [6]


def test_metadata_reports_what_the_training_actions_were_added_to(state_runtime, monkeypatch):
    assert state_runtime.metadata["action_frame"] == "measured"  # a dataset that does not say
    monkeypatch.setitem(state_runtime.policy.metadata, "action_frame", "previous_target")
    assert state_runtime.metadata["action_frame"] == "previous_target"


def test_stacking_asked_of_a_state_policy_changes_nothing(state_ckpt):
    for wanted in ("stacked", "twin"):
        runtime = PolicyRuntime.load(state_ckpt, buckets=(1,), name="state-stacked", encoders=wanted)
        assert runtime.encoders == "separate"  # nothing to stack: a state MQE policy has no image encoders


def test_image_policies_serve_twin_encoders_and_matmul_convolutions_on_gpus_separate_and_xla_on_the_cpu():
    assert encoders_on("gpu") == encoders_on("tpu") == "twin" and encoders_on("cpu") == "separate"
    assert conv_on("gpu") == "matmul" and conv_on("cpu") == conv_on("tpu") == "xla"


def test_arrangements_fall_back_to_the_nearest_the_policy_has():
    from server.runtime import served_arrangement

    assert served_arrangement("twin", ("separate", "stacked")) == "stacked"  # impala: no twin
    assert served_arrangement("stacked", ("separate", "stacked", "twin")) == "stacked"
    assert served_arrangement("twin", ("separate",)) == "separate"
    with pytest.raises(ValueError, match=r"encoders='vmap': choose one of \['separate', 'stacked', 'twin'\]"):
        served_arrangement("vmap", ("separate",))


def test_stacked_encoders_serve_the_same_actions(runtime, image_ckpt):
    from mqe_model.networks.serving import STACKED_ENCODERS

    stacked = PolicyRuntime.load(image_ckpt, buckets=(2,), name="img-stacked", encoders="stacked")
    assert STACKED_ENCODERS in stacked._params and STACKED_ENCODERS not in runtime._params
    assert stacked.encoders == "stacked" and runtime.encoders == "separate"
    assert PolicyRuntime.load(image_ckpt, buckets=(1,), encoders="twin").encoders == "stacked"  # impala
    assert_same_answers(stacked, runtime)


def test_twin_resnet_encoder_serves_the_same_actions(tmp_path):
    from mqe_model.networks.serving import TWIN_ENCODER
    from server.random_checkpoint import write_random_checkpoint

    checkpoint = write_random_checkpoint(tmp_path / "resnet", "mqe", "tiny", ("encoder=resnet_tiny",), 32)
    twin, separate = (PolicyRuntime.load(checkpoint, buckets=(2,), name=a, encoders=a) for a in ("twin", "separate"))
    assert twin.encoders == "twin" and TWIN_ENCODER in twin._params
    assert_same_answers(twin, separate)


def test_repeated_goal_codes_are_copied_to_the_device_once_and_answers_come_packed(runtime, monkeypatch):
    obs, goals = images(1, seed=6), images(2, seed=7)
    codes = codes_of(runtime, goals)
    want = [runtime.act_batch(obs[:1], codes[i:i + 1]) for i in range(2)]  # one frame, each goal
    puts = []
    real_put = jax.device_put
    monkeypatch.setattr(jax, "device_put", lambda x, *a, **k: puts.append(np.shape(x)) or real_put(x, *a, **k))
    mine = codes[:1].copy()
    first = runtime.act_batch(obs[:1], mine)
    mine[:] = codes[1:2]  # the caller reuses its array: the kept copy is the runtime's own
    second = runtime.act_batch(obs[:1], mine)
    again = runtime.act_batch(obs[:1], mine)
    assert puts == [codes[:1].shape, codes[:1].shape]  # the new codes once, their repeat never
    for got, reference in ((first, want[0]), (second, want[1]), (again, want[1])):
        for g, w in zip(got, reference, strict=True):
            np.testing.assert_array_equal(g, w)
    outputs = runtime._compiled[1].out_info
    assert outputs.shape == (1, runtime.policy.action_dim + 1) and outputs.dtype == np.float32  # one copy back
    actions, distances = second
    assert actions.shape == (1, runtime.policy.action_dim) and distances.shape == (1,)
    assert not np.allclose(second[0], first[0])  # the second goal's action, not the first's


def test_matmul_convolutions_serve_the_same_actions_with_no_convolution_op(runtime, image_ckpt):
    matmul = PolicyRuntime.load(image_ckpt, buckets=(2,), name="img-matmul", conv="matmul")
    assert matmul.conv == "matmul" and runtime.conv == "xla"
    assert "convolution(" in runtime._compiled[2].as_text()
    assert "convolution(" not in matmul._compiled[2].as_text()
    assert "convolution(" not in matmul._compiled_goal.as_text()
    assert_same_answers(matmul, runtime)


def test_host_io_acts_take_frames_from_pinned_host_memory_and_leave_their_answers_there(runtime, image_ckpt):
    host = PolicyRuntime.load(image_ckpt, buckets=(1, 2), name="img-host-io", host_io=True)
    assert host.host_io and not runtime.host_io
    for size in (1, 2):
        params_at, frame_at, codes_at = host._compiled[size].input_shardings[0]
        assert frame_at.memory_kind == "pinned_host" and codes_at.memory_kind == "device"  # codes stay resident
        assert host._compiled[size].output_shardings.memory_kind == "pinned_host"
    frame_at = runtime._compiled[2].input_shardings[0][1]
    assert frame_at.memory_kind == "device" and runtime._compiled[2].output_shardings.memory_kind == "device"
    assert_same_answers(host, runtime)
    handed = []
    compiled = host._compiled[2]
    host._compiled[2] = lambda params, frames, codes: handed.append((frames, codes)) or compiled(params, frames, codes)
    host.act_batch(images(2, seed=6), codes_of(host, images(2, seed=7)))
    host.act_batch(images(2, seed=6), codes_of(host, images(2, seed=7)))  # the call that failed on a GPU
    assert [frames.sharding.memory_kind for frames, _ in handed] == ["pinned_host"] * 2  # put there, not by the call
    assert [codes.sharding.memory_kind for _, codes in handed] == ["device"] * 2
    host._compiled[2] = compiled
    one = host.act(images(1, seed=8)[0], codes_of(host, images(1, seed=9))[0])  # a padded bucket of one
    assert one[0].shape == (host.policy.action_dim,) and np.isfinite(one[0]).all()


def assert_same_answers(served: PolicyRuntime, reference: PolicyRuntime) -> None:
    obs, goals = images(2, seed=4), images(2, seed=5)
    codes = codes_of(served, goals)
    np.testing.assert_allclose(codes, codes_of(reference, goals), rtol=1e-5, atol=1e-5)
    for got, want in zip(served.act_batch(obs, codes), reference.act_batch(obs, codes), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def column_major_for_matrices(leaf, sharding):
    """A layout choice other than row-major, as XLA makes for convolution filters on a GPU (on the CPU
    it keeps row-major, so the test makes the choice itself)."""
    from jax.experimental.layout import Format, Layout

    return Format(Layout(major_to_minor=tuple(reversed(range(leaf.ndim)))), sharding) if leaf.ndim >= 2 else \
        Format(Layout.AUTO, sharding)


def test_weights_live_in_the_layout_every_executable_was_compiled_for(image_ckpt, monkeypatch):
    import server.runtime

    monkeypatch.setattr(server.runtime, "layout_request", column_major_for_matrices)
    chosen = PolicyRuntime.load(image_ckpt, buckets=(1, 2), name="img-layouts")
    plain = PolicyRuntime.load(image_ckpt, buckets=(1, 2), name="img-row-major", device_layouts=False)
    leaves = jax.tree_util.tree_leaves(chosen._params)
    # the act's filters and matrices took the layout asked for (weights the act does not read, such as
    # phi, keep row-major: XLA lays out only what it uses)
    conv_filters = [x for x in leaves if x.ndim == 4]
    assert conv_filters and all(x.format.layout.major_to_minor == (3, 2, 1, 0) for x in conv_filters)
    assert all(x.format.layout.major_to_minor == tuple(range(x.ndim)) for x in jax.tree_util.tree_leaves(plain._params))
    # one copy of the weights serves the goal encoder and every bucket: each was compiled for its layout
    # (a weight an executable does not read has no layout there: the goal encoder skips the actor's head)
    for executable in (chosen._compiled_goal, *chosen._compiled.values()):
        formats = jax.tree_util.tree_leaves(executable.input_formats[0][0], is_leaf=lambda f: f is None)
        used = [(f.layout, x.format.layout) for f, x in zip(formats, leaves, strict=True) if f.layout is not None]
        assert used and all(compiled == stored for compiled, stored in used)
    obs, goals = images(3, seed=6), images(3, seed=7)
    codes = codes_of(chosen, goals)
    np.testing.assert_allclose(codes, codes_of(plain, goals), rtol=1e-5, atol=1e-6)
    for got, want in zip(chosen.act_batch(obs, codes), plain.act_batch(obs, codes), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_checkpoint_without_action_frame_reports_measured():
    import json

    from mqe_model.demo import DEMO_CHECKPOINT, demo_step_dir

    metadata = json.loads((demo_step_dir() / "metadata" / "metadata").read_text())
    assert "action_frame" not in metadata  # the bundled demo policy predates the field
    assert PolicyRuntime.load(DEMO_CHECKPOINT, buckets=(1,)).metadata["action_frame"] == "measured"
