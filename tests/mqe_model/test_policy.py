"""load_policy: params and metadata only, actions in robot units, a stable fingerprint."""

from __future__ import annotations

import dataclasses
import shutil

import jax
import numpy as np
import pytest
from train_helpers import TMP, tiny_run

from mqe_model.agents import mqe, registry
from mqe_model.checkpoints import CheckpointError
from mqe_model.data.normalization import ActionStats
from mqe_model.networks import serving
from mqe_model.policy import (
    ActionSampling,
    encoder_arrangements,
    inference_fns,
    load_policy,
    serving_fns,
)


def unit_stats(dim: int) -> ActionStats:
    """Action statistics whose robot units are the normalized ones: [-1, 1] maps to itself."""
    return ActionStats(mean=(0.0,) * dim, std=(1.0,) * dim, low=(-1.0,) * dim, high=(1.0,) * dim)


@pytest.mark.parametrize("agent", ["mqe", "gcbc", "gciql"])
def test_act_fn_answers_robot_units(agent):
    policy = load_policy(tiny_run(agent) / "checkpoints")
    assert policy.agent_name == agent and policy.step == 30
    assert policy.observation_shape == (6,) and policy.action_dim == 3
    assert policy.has_distance == (agent == "mqe")
    obs = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    actions, distance = jax.jit(policy.act_fn)(policy.params, obs, obs[::-1])
    low, high = np.asarray(policy.action_stats.low), np.asarray(policy.action_stats.high)
    assert actions.shape == (4, 3)
    assert np.all(np.asarray(actions) >= low - 1e-5) and np.all(np.asarray(actions) <= high + 1e-5)
    if agent == "mqe":
        assert np.all(np.isfinite(distance)) and np.all(np.asarray(distance) >= 0)
    else:
        assert np.all(np.isnan(distance))


def test_fingerprint_is_stable_and_only_params_are_needed():
    source = tiny_run("mqe") / "checkpoints" / "30"
    copy = TMP / "params-only" / "30"
    shutil.copytree(source, copy, dirs_exist_ok=True)
    shutil.rmtree(copy / "train_state")  # serving must not need the optimizer state
    a, b = load_policy(source), load_policy(copy)
    assert a.fingerprint == b.fingerprint and len(a.fingerprint) == 64
    assert a.fingerprint != load_policy(tiny_run("gcbc")).fingerprint


def test_mqe_distance_matches_the_agent_distance():
    policy = load_policy(tiny_run("mqe"))
    obs = np.random.default_rng(1).normal(size=(3, 6)).astype(np.float32)
    example = {"observations": obs, "actions": np.zeros((3, 3), np.float32)}
    agent = mqe.Agent.create(0, example, policy.config).replace(params=policy.params)
    _, distance = policy.act_fn(policy.params, obs, obs[::-1])
    np.testing.assert_allclose(distance, agent.distance(obs, obs[::-1]), rtol=1e-5)


def test_missing_checkpoint_names_the_path(tmp_path):
    with pytest.raises(CheckpointError, match=str(tmp_path)):
        load_policy(tmp_path)


@pytest.mark.parametrize("encoder", [None, "impala_tiny", "resnet_tiny"])
def test_goal_codes_then_act_equal_the_agent_on_raw_goals(encoder):
    """Serving encodes a goal once (psi(g), actor goal features); the result must be the agent's."""
    import dataclasses

    config = dataclasses.replace(mqe.get_config("tiny"), encoder=encoder)
    rng = np.random.default_rng(2)
    obs = (rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8) if encoder
           else rng.normal(size=(3, 6)).astype(np.float32))
    goals = obs[::-1].copy()
    agent = mqe.Agent.create(0, {"observations": obs, "actions": np.zeros((3, 4), np.float32)}, config)
    expected = agent.sample_actions(obs, goals, jax.random.PRNGKey(0), temperature=0.0)
    served = [(agent.params, mqe.inference_fns(config, 4))]
    # the server's layouts (image MQE: both encoders as one network, stacked or a ResNet's twin) answer alike
    arrangements = encoder_arrangements("mqe", config)
    assert arrangements == {None: ("separate",), "impala_tiny": ("separate", "stacked"),
                            "resnet_tiny": ("separate", "stacked", "twin")}[encoder]
    for arrangement in arrangements:
        prepare, *fns = serving_fns("mqe", config, unit_stats(4), arrangement)
        served.append((prepare(agent.params), fns))
    for params, (encode_goals, act) in served:
        codes = jax.jit(encode_goals)(params, goals)
        assert codes.shape[0] == 3 and codes.dtype == np.float32
        actions, distance = jax.jit(act)(params, obs, codes)
        np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(distance, agent.distance(obs, goals), rtol=1e-5, atol=1e-6)


def test_baselines_serve_their_checkpoint_params_as_they_are():
    config = dataclasses.replace(mqe.get_config("tiny"), encoder="impala_tiny")
    params = {"actor": {}}
    for name in ("gcbc", "gciql"):  # nothing to stack: the checkpoint's params are served as they are
        prepare, *_ = serving_fns(name, config, unit_stats(4))
        assert prepare(params) is params
        with pytest.raises(ValueError, match=r"encoders='stacked' does not apply to this .* \['separate'\]"):
            serving_fns(name, config, unit_stats(4), "stacked")


def test_actor_refuses_encoded_observations_with_raw_goals():
    import dataclasses

    config = dataclasses.replace(mqe.get_config("tiny"), encoder="impala_tiny")
    obs = np.zeros((1, 16, 16, 3), np.uint8)
    with pytest.raises(ValueError, match="needs goals_encoded"):
        mqe.make_actor(config, 4).init(jax.random.PRNGKey(0), obs, obs, observations_encoded=True)


@pytest.mark.parametrize("agent", ["mqe", "gcbc"])
def test_sampled_actions_are_the_mean_plus_scaled_noise_then_clipped(agent):
    """OGBench's sampling: clip(mean + temperature * std * noise), the raw mean, not the clipped one."""
    policy = load_policy(tiny_run(agent))
    params = jax.tree_util.tree_map_with_path(  # the mean moved past the range, so clip(mean) != mean
        lambda path, x: x + 1.5 if jax.tree_util.keystr(path).endswith("['GaussianActorHead_0']['Dense_0']['bias']")
        else x, policy.params)
    encode, act = registry.get(agent).inference_fns(policy.config, policy.action_dim)
    _, raw_mean = registry.get(agent).inference_fns(policy.config, policy.action_dim, clip=False)
    _, act_sampled = inference_fns(agent, policy.config, unit_stats(policy.action_dim), ActionSampling(0.5))
    rng = np.random.default_rng(3)
    obs = rng.normal(size=(32, 6)).astype(np.float32)
    codes = encode(params, obs[::-1])
    noise = 3.0 * rng.normal(size=(32, policy.action_dim)).astype(np.float32)
    mean, distance = raw_mean(params, obs, codes)
    sampled, sampled_distance = act_sampled(params, obs, codes, noise)
    shifted = np.asarray(mean) + 0.5 * policy.config.actor_std * noise
    assert np.all(np.asarray(mean) > 1.0) and np.any(np.abs(shifted) < 1.0)  # both sides of the clip
    np.testing.assert_allclose(sampled, np.clip(shifted, -1.0, 1.0), rtol=1e-6, atol=1e-6)
    assert not np.allclose(sampled, np.clip(np.clip(mean, -1.0, 1.0) + shifted - mean, -1.0, 1.0))
    np.testing.assert_array_equal(sampled_distance, distance)  # the critic's read-out does not sample
    zero_noise, _ = act_sampled(params, obs, codes, np.zeros_like(noise))
    np.testing.assert_allclose(zero_noise, act(params, obs, codes)[0], rtol=1e-6, atol=1e-6)


def test_sampled_actions_come_in_robot_units():
    policy = load_policy(tiny_run("mqe"))
    stats = policy.action_stats
    encode, act = inference_fns("mqe", policy.config, stats, ActionSampling(2.0))
    obs = np.random.default_rng(4).normal(size=(8, 6)).astype(np.float32)
    noise = np.full((8, policy.action_dim), 10.0, np.float32)  # every action clipped to its high end
    actions, _ = act(policy.params, obs, encode(policy.params, obs), noise)
    np.testing.assert_allclose(actions, np.broadcast_to(np.asarray(stats.high, np.float32), (8, 3)), rtol=1e-6)


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("nan")])
def test_action_sampling_needs_a_positive_temperature(temperature):
    with pytest.raises(ValueError, match="temperature > 0"):
        ActionSampling(temperature)


def conv_kernel_dtypes(params) -> set:
    from flax import traverse_util

    flat = traverse_util.flatten_dict(params)
    return {str(leaf.dtype) for path, leaf in flat.items() if path[-1] == "kernel" and path[-2].startswith("Conv_")}


def test_serving_casts_bf16_convolution_kernels_once_with_the_same_answers():
    """A bf16 encoder's filters are served already in bf16; every other weight stays as trained, and
    the goal codes and actions are the very numbers of the uncast weights (flax casts them alike)."""
    import dataclasses

    from flax import traverse_util

    config = dataclasses.replace(mqe.get_config("tiny"), encoder="resnet_tiny_bf16")
    rng = np.random.default_rng(3)
    obs = rng.integers(0, 256, (2, 16, 16, 3), dtype=np.uint8)
    goals = obs[::-1].copy()
    params = mqe.Agent.create(0, {"observations": obs, "actions": np.zeros((2, 4), np.float32)}, config).params
    for arrangement, uncast in (("separate", params), ("stacked", serving.stack_encoders(params, config.encoder)),
                                ("twin", serving.stack_encoders(params, config.encoder, twin=True))):
        prepare, encode_goals, act = serving_fns("mqe", config, unit_stats(4), arrangement)
        served = prepare(params)
        assert conv_kernel_dtypes(uncast) == {"float32"} and conv_kernel_dtypes(served) == {"bfloat16"}
        changed = {path for path, leaf in traverse_util.flatten_dict(served).items()
                   if leaf.dtype != traverse_util.flatten_dict(uncast)[path].dtype}
        assert changed and all(path[-1] == "kernel" and path[-2].startswith("Conv_") for path in changed)
        codes = jax.jit(encode_goals)(served, goals)
        np.testing.assert_array_equal(codes, jax.jit(encode_goals)(uncast, goals))
        for got, want in zip(jax.jit(act)(served, obs, codes), jax.jit(act)(uncast, obs, codes), strict=True):
            np.testing.assert_array_equal(got, want)
    impala = dataclasses.replace(config, encoder="impala_tiny")  # a float32 encoder: nothing to cast
    impala_params = mqe.Agent.create(0, {"observations": obs, "actions": np.zeros((2, 4), np.float32)},
                                        impala).params
    assert serving_fns("mqe", impala, unit_stats(4))[0](impala_params) is impala_params


def test_with_conv_switches_an_image_encoders_convolutions_and_leaves_state_policies_alone():
    from mqe_model.policy import with_conv

    image = dataclasses.replace(mqe.get_config("tiny"), encoder="resnet_tiny")
    assert with_conv(image, "matmul").encoder == "resnet_tiny:matmul"
    assert with_conv(with_conv(image, "matmul"), "xla").encoder == "resnet_tiny"
    assert with_conv(image, "xla") is image
    state = mqe.get_config("tiny")
    assert state.encoder is None and with_conv(state, "matmul") is state  # no convolutions to change
    with pytest.raises(ValueError, match="conv='fft': choose one of xla, matmul"):
        with_conv(image, "fft")
