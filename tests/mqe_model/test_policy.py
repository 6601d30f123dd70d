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
from mqe_model.policy import inference_fns, load_policy
from mqe_model.quasimetric import mrn_distance


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
    agent = mqe.MQEAgent.create(0, example, policy.config).replace(params=policy.params)
    _, distance = policy.act_fn(policy.params, obs, obs[::-1])
    np.testing.assert_allclose(distance, agent.distance(obs, obs[::-1]), rtol=1e-5)


def test_missing_checkpoint_names_the_path(tmp_path):
    with pytest.raises(CheckpointError, match=str(tmp_path)):
        load_policy(tmp_path)


@pytest.mark.parametrize("encoder", [None, "impala_tiny", "resnet_tiny"])
def test_goal_codes_then_act_equal_the_agent_on_raw_goals(encoder):
    """Serving encodes a goal once (psi(g), actor goal features); the result must be the agent's."""
    import dataclasses

    from mqe_model.agents import registry

    config = dataclasses.replace(mqe.get_config("tiny"), encoder=encoder)
    rng = np.random.default_rng(2)
    obs = (rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8) if encoder
           else rng.normal(size=(3, 6)).astype(np.float32))
    goals = obs[::-1].copy()
    agent = mqe.MQEAgent.create(0, {"observations": obs, "actions": np.zeros((3, 4), np.float32)}, config)
    expected = agent.sample_actions(obs, goals, jax.random.PRNGKey(0), temperature=0.0)
    served = [(agent.params, registry.make_goal_and_act_fns("mqe", config, 4))]
    # the server's layouts (image MQE: both encoders as one network, stacked or a ResNet's twin) answer alike
    arrangements = registry.encoder_arrangements("mqe", config)
    assert arrangements == {None: ("separate",), "impala_tiny": ("separate", "stacked"),
                            "resnet_tiny": ("separate", "stacked", "twin")}[encoder]
    for arrangement in arrangements:
        prepare, *serving = registry.make_serving_fns("mqe", config, 4, arrangement)
        served.append((prepare(agent.params), serving))
    for params, (encode_goals, act) in served:
        codes = jax.jit(encode_goals)(params, goals)
        assert codes.shape[0] == 3 and codes.dtype == np.float32
        actions, distance = jax.jit(act)(params, obs, codes)
        np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(distance, agent.distance(obs, goals), rtol=1e-5, atol=1e-6)


def test_serving_layout_stacks_the_two_encoders_once():
    import dataclasses

    from mqe_model.agents import registry

    config = dataclasses.replace(mqe.get_config("tiny"), encoder="impala_tiny")
    obs = np.zeros((2, 16, 16, 3), np.uint8)
    params = mqe.MQEAgent.create(0, {"observations": obs, "actions": np.zeros((2, 4), np.float32)}, config).params
    served = mqe.stack_encoders(params, config)
    assert set(served) == {"actor", "critic", mqe.STACKED_ENCODERS}
    assert "encoder" not in served["critic"] and not any("Encoder" in k for k in served["actor"])
    critic_kernel = jax.tree_util.tree_leaves(params["critic"]["encoder"])[0]
    assert jax.tree_util.tree_leaves(served[mqe.STACKED_ENCODERS])[0].shape == (2, *critic_kernel.shape)
    with pytest.raises(ValueError, match="no image encoder"):
        mqe.stack_encoders(params, mqe.get_config("tiny"))
    with pytest.raises(ValueError, match="only ResNet encoders have a twin, not ImpalaEncoder"):
        mqe.stack_encoders(params, config, twin=True)
    for name in ("gcbc", "gciql"):  # nothing to stack: the checkpoint's params are served as they are
        prepare, *_ = registry.make_serving_fns(name, config, 4)
        assert prepare(params) is params
        with pytest.raises(ValueError, match=r"encoders='stacked' does not apply to this .* \['separate'\]"):
            registry.make_serving_fns(name, config, 4, "stacked")


def test_twin_encoder_is_the_two_resnets_side_by_side():
    """One ResNet of twice the width: the stem's filters side by side, every later filter block-diagonal
    with exact zeros off the diagonal, GroupNorm's groups doubled so each holds one encoder's channels;
    its features are the actor encoder's, then the critic encoder's."""
    import dataclasses

    from flax import traverse_util

    from mqe_model.networks.encoders import make_encoder, twin_encoder

    config = dataclasses.replace(mqe.get_config("tiny"), encoder="resnet_tiny")
    rng = np.random.default_rng(4)
    obs = rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
    params = mqe.MQEAgent.create(0, {"observations": obs, "actions": np.zeros((3, 4), np.float32)}, config).params
    # away from the initialisation, whose zero GroupNorm scales would hide a misplaced block
    leaves, tree = jax.tree_util.tree_flatten(params)
    params = jax.tree_util.tree_unflatten(tree, [leaf + 0.1 * rng.standard_normal(leaf.shape).astype(leaf.dtype)
                                                 for leaf in leaves])
    served = mqe.stack_encoders(params, config, twin=True)
    assert set(served) == {"actor", "critic", mqe.TWIN_ENCODER}
    actor_encoder, critic_encoder = params["actor"]["ResNetEncoder_0"], params["critic"]["encoder"]
    flat = traverse_util.flatten_dict(served[mqe.TWIN_ENCODER])
    stem = flat[("Conv_0", "kernel")]
    np.testing.assert_array_equal(stem, np.concatenate([actor_encoder["Conv_0"]["kernel"],
                                                        critic_encoder["Conv_0"]["kernel"]], axis=-1))
    block = flat[("ResNetBasicBlock_0", "Conv_0", "kernel")]
    a, c = (e["ResNetBasicBlock_0"]["Conv_0"]["kernel"] for e in (actor_encoder, critic_encoder))
    (cin, cout) = a.shape[-2:]
    np.testing.assert_array_equal(block[..., :cin, :cout], a)
    np.testing.assert_array_equal(block[..., cin:, cout:], c)
    assert not np.any(block[..., :cin, cout:]) and not np.any(block[..., cin:, :cout])
    encoder = twin_encoder(make_encoder("resnet_tiny"))
    features = encoder.apply({"params": served[mqe.TWIN_ENCODER]}, obs)
    separate = [make_encoder("resnet_tiny").apply({"params": p}, obs) for p in (actor_encoder, critic_encoder)]
    np.testing.assert_allclose(features, np.concatenate(separate, axis=-1), rtol=1e-5, atol=1e-5)
    for got, want in zip(mqe.encode_stacked(served, obs, config), separate, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_actor_refuses_encoded_observations_with_raw_goals():
    import dataclasses

    config = dataclasses.replace(mqe.get_config("tiny"), encoder="impala_tiny")
    obs = np.zeros((1, 16, 16, 3), np.uint8)
    with pytest.raises(ValueError, match="needs goals_encoded"):
        mqe.Actor(config, 4).init(jax.random.PRNGKey(0), obs, obs, observations_encoded=True)


def test_critic_selection_never_picks_an_action_the_critic_rates_below_the_actors():
    policy = load_policy(tiny_run("mqe"))
    selection = registry.CriticSelection(candidates=16, spread=0.5)
    encode, act = registry.make_goal_and_act_fns("mqe", policy.config, policy.action_dim)
    _, act_selected = registry.make_critic_selected_fns(policy.config, policy.action_dim, selection)
    obs = np.random.default_rng(2).normal(size=(32, 6)).astype(np.float32)
    goals = obs[::-1]
    codes = encode(policy.params, goals)
    actor_actions, _ = act(policy.params, obs, codes)
    chosen, _ = act_selected(policy.params, obs, codes)
    agent = mqe.MQEAgent.create(0, {"observations": obs, "actions": np.zeros((32, 3), np.float32)},
                                policy.config).replace(params=policy.params)

    def q(actions):  # the actor's objective: minus the nearer head's distance
        critic = mqe.Critic(policy.config)
        phi = critic.apply({"params": agent.params["critic"]}, obs, actions, method=mqe.Critic.phi)
        psi = critic.apply({"params": agent.params["critic"]}, goals, method=mqe.Critic.psi)
        return -np.min(np.asarray(mrn_distance(phi, psi, policy.config.num_components)), axis=0)

    _, act_worst = registry.make_critic_selected_fns(policy.config, policy.action_dim,
                                                     registry.CriticSelection(16, 0.5, pick="worst"))
    worst, _ = act_worst(policy.params, obs, codes)
    assert np.all(np.abs(np.asarray(chosen)) <= 1.0)
    assert np.all(q(chosen) >= q(actor_actions) - 1e-6)
    assert np.all(q(worst) <= q(actor_actions) + 1e-6)
    assert np.any(q(chosen) > q(actor_actions))  # 15 perturbations of an untrained actor: some help


@pytest.mark.parametrize("candidates, spread", [(1, 0.1), (4, 0.0), (4, float("nan"))])
def test_critic_selection_rejects_settings_that_select_nothing(candidates, spread):
    with pytest.raises(ValueError, match="candidates >= 2 and spread > 0"):
        registry.CriticSelection(candidates, spread)
    with pytest.raises(ValueError, match="'best' or 'worst'"):
        registry.CriticSelection(4, 0.1, pick="median")


def test_critic_selection_needs_an_mqe_policy():
    policy = load_policy(tiny_run("gcbc"))
    with pytest.raises(ValueError, match="needs an MQE policy"):
        inference_fns("gcbc", policy.config, policy.action_stats, registry.CriticSelection(4, 0.1))


@pytest.mark.parametrize("agent", ["mqe", "gcbc"])
def test_sampled_actions_are_the_mean_plus_scaled_noise_then_clipped(agent):
    """OGBench's sampling: clip(mean + temperature * std * noise), the raw mean, not the clipped one."""
    policy = load_policy(tiny_run(agent))
    params = jax.tree_util.tree_map_with_path(  # the mean moved past the range, so clip(mean) != mean
        lambda path, x: x + 1.5 if jax.tree_util.keystr(path).endswith("['GaussianActorHead_0']['Dense_0']['bias']")
        else x, policy.params)
    encode, act = registry.make_goal_and_act_fns(agent, policy.config, policy.action_dim)
    _, raw_mean = registry.make_goal_and_act_fns(agent, policy.config, policy.action_dim, clip=False)
    _, act_sampled = registry.make_sampled_fns(agent, policy.config, policy.action_dim, registry.ActionSampling(0.5))
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
    encode, act = inference_fns("mqe", policy.config, stats, registry.ActionSampling(2.0))
    obs = np.random.default_rng(4).normal(size=(8, 6)).astype(np.float32)
    noise = np.full((8, policy.action_dim), 10.0, np.float32)  # every action clipped to its high end
    actions, _ = act(policy.params, obs, encode(policy.params, obs), noise)
    np.testing.assert_allclose(actions, np.broadcast_to(np.asarray(stats.high, np.float32), (8, 3)), rtol=1e-6)


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("nan")])
def test_action_sampling_needs_a_positive_temperature(temperature):
    with pytest.raises(ValueError, match="temperature > 0"):
        registry.ActionSampling(temperature)


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
    params = mqe.MQEAgent.create(0, {"observations": obs, "actions": np.zeros((2, 4), np.float32)}, config).params
    for arrangement, uncast in (("separate", params), ("stacked", mqe.stack_encoders(params, config)),
                                ("twin", mqe.stack_encoders(params, config, twin=True))):
        prepare, encode_goals, act = registry.make_serving_fns("mqe", config, 4, arrangement)
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
    impala_params = mqe.MQEAgent.create(0, {"observations": obs, "actions": np.zeros((2, 4), np.float32)},
                                        impala).params
    assert registry.make_serving_fns("mqe", impala, 4)[0](impala_params) is impala_params


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
