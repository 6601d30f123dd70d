import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mqe_model.agents import mqe
from mqe_model.agents.mqe import backup_loss, invariance_loss
from mqe_model.networks.mlp import gaussian_log_prob
from mqe_model.networks.mqe import Critic
from mqe_model.quasimetric import mrn_distance, mrn_pairwise_naive

# The losses jitted once per config (the config is static): op-by-op they took most of these tests' time.
critic_loss = jax.jit(mqe.critic_loss, static_argnums=2)
actor_loss = jax.jit(mqe.actor_loss, static_argnums=2)
actor_loss_and_grads = jax.jit(jax.value_and_grad(mqe.actor_loss, has_aux=True), static_argnums=2)


def loss_grads(loss, config):
    """The compiled gradient of `loss`'s total (critic_loss or actor_loss) with respect to the params."""
    return jax.jit(jax.grad(lambda params, batch: loss(params, batch, config)[0]))


def linex(dist, dist_w, k, gamma, clip=5.0):
    delta = dist - dist_w
    return delta if delta > clip else gamma**k * math.exp(delta) - dist


DIST = [[1.0, 2.0], [0.5, 7.0]]
DIST_W = [[0.5, 1.0], [0.0, 1.0]]
K = [1, 2]


def test_backup_loss_by_hand():
    gamma = 0.9
    per_pair = [[linex(DIST[i][j], DIST_W[i][j], K[i], gamma) for j in range(2)] for i in range(2)]
    # Pair (1, 1) has delta = 6 > 5: the linear branch, value 6.
    assert per_pair[1][1] == 6.0
    all_mean = sum(map(sum, per_pair)) / 4
    diag_mean = (per_pair[0][0] + per_pair[1][1]) / 2
    got = backup_loss(jnp.array([DIST]), jnp.array([DIST_W]), jnp.array(K), gamma)
    assert float(got) == pytest.approx(0.5 * all_mean + 0.5 * diag_mean, rel=1e-6)
    only_all = backup_loss(jnp.array([DIST]), jnp.array([DIST_W]), jnp.array(K), gamma, diag_weight=0.0)
    assert float(only_all) == pytest.approx(all_mean, rel=1e-6)
    only_diag = backup_loss(jnp.array([DIST]), jnp.array([DIST_W]), jnp.array(K), gamma, diag_weight=1.0)
    assert float(only_diag) == pytest.approx(diag_mean, rel=1e-6)


def test_backup_loss_averages_heads():
    heads = jnp.array([DIST, [[0.0, 0.0], [0.0, 0.0]]])
    heads_w = jnp.array([DIST_W, DIST_W])
    each = [float(backup_loss(heads[h : h + 1], heads_w[h : h + 1], jnp.array(K), 0.9)) for h in range(2)]
    assert float(backup_loss(heads, heads_w, jnp.array(K), 0.9)) == pytest.approx(np.mean(each), rel=1e-6)


def test_backup_gradients_finite_where_exp_would_overflow():
    dist = jnp.full((1, 3, 3), 1000.0)  # exp(1000) overflows float32
    dist_w = jnp.zeros((1, 3, 3))
    grad_d, grad_w = jax.grad(
        lambda d, w: backup_loss(d, w, jnp.array([1, 1, 1]), 0.99), argnums=(0, 1)
    )(dist, dist_w)
    assert np.all(np.isfinite(grad_d))
    # Linear branch: each pair contributes delta with weight 0.5 / 9, plus 0.5 / 3 on the diagonal.
    expected = np.full((3, 3), 0.5 / 9) + np.eye(3) * 0.5 / 3
    np.testing.assert_allclose(grad_d[0], expected, rtol=1e-6)
    # The waypoint distance is a target: no gradient flows into it.
    np.testing.assert_array_equal(grad_w, 0.0)


def test_backup_fixed_point_is_waypoint_plus_k_steps():
    # d/d(dist) of gamma^k exp(dist - dist_w) - dist vanishes at dist = dist_w - k log(gamma).
    gamma, k, dist_w = 0.95, 3, 0.4
    target = dist_w - k * math.log(gamma)
    grad = jax.grad(
        lambda d: backup_loss(d.reshape(1, 1, 1), jnp.full((1, 1, 1), dist_w), jnp.array([k]), gamma)
    )(jnp.array(target))
    assert abs(float(grad)) < 1e-5


def test_invariance_loss_by_hand():
    d = jnp.array([0.0, math.log(2.0)])  # (e^0 - 1)^2 = 0, (1/2 - 1)^2 = 1/4
    assert float(invariance_loss(d)) == pytest.approx(0.125, rel=1e-6)


def make_batch(rng: np.random.Generator, batch: int, obs_dim: int = 6, action_dim: int = 2) -> dict:
    obs = lambda: rng.normal(size=(batch, obs_dim)).astype(np.float32)  # noqa: E731
    return {
        "observations": obs(),
        "actions": rng.uniform(-1, 1, size=(batch, action_dim)).astype(np.float32),
        "waypoints": obs(),
        "waypoint_offsets": rng.integers(1, 5, size=batch).astype(np.int32),
        "goals": obs(),
        "actor_goals": obs(),
    }


@pytest.fixture(scope="module")
def tiny():
    return dataclasses.replace(mqe.get_config("tiny"), batch_size=16)


def test_update_changes_params_and_reports_namespaced_metrics(tiny):
    batch = make_batch(np.random.default_rng(0), tiny.batch_size)
    agent = mqe.Agent.create(0, batch, tiny)
    new, info = agent.update(batch)
    assert int(new.step) == 1
    assert all(k.split("/")[0] in {"critic", "actor", "grad"} for k in info)
    assert all(np.isfinite(float(v)) for v in info.values())
    changed = jax.tree_util.tree_map(lambda a, b: bool(jnp.any(a != b)), agent.params, new.params)
    assert all(jax.tree_util.tree_leaves(changed))
    # q = -d <= 0, so -mean(q) / mean(|q|) is exactly 1 whatever the critic says.
    assert float(info["actor/q_loss"]) == pytest.approx(1.0, rel=1e-5)


def test_actor_loss_sends_no_gradient_into_the_critic(tiny):
    batch = make_batch(np.random.default_rng(1), tiny.batch_size)
    agent = mqe.Agent.create(0, batch, tiny)
    grads = loss_grads(actor_loss, tiny)(agent.params, batch)
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree_util.tree_leaves(grads["critic"]))
    assert any(float(jnp.abs(g).max()) > 0.0 for g in jax.tree_util.tree_leaves(grads["actor"]))


def test_the_flat_optimizer_takes_the_same_steps(tiny):
    """optax.flatten(adam) on the raveled parameters: the same Adam arithmetic, so the same parameters
    after several updates (to float32 rounding), through update_many's scan too."""
    rng = np.random.default_rng(14)
    batches = [make_batch(rng, tiny.batch_size) for _ in range(3)]
    agents = [mqe.Agent.create(0, batches[0], dataclasses.replace(tiny, flat_optimizer=flat)) for flat in (False, True)]
    stacked = jax.tree_util.tree_map(lambda *x: np.stack(x), *batches)
    results = [agent.update_many(stacked)[0] for agent in agents]
    for tree, flat in zip(*(jax.tree_util.tree_leaves(r.params) for r in results), strict=True):
        np.testing.assert_allclose(flat, tree, rtol=1e-5, atol=1e-6)
    assert not np.allclose(jax.tree_util.tree_leaves(results[1].params)[0], jax.tree_util.tree_leaves(agents[1].params)[0])
    assert len(jax.tree_util.tree_leaves(results[1].opt_state)) < len(jax.tree_util.tree_leaves(results[0].opt_state))


def test_critic_loss_sends_no_gradient_into_the_actor(tiny):
    batch = make_batch(np.random.default_rng(2), tiny.batch_size)
    agent = mqe.Agent.create(0, batch, tiny)
    grads = loss_grads(critic_loss, tiny)(agent.params, batch)
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree_util.tree_leaves(grads["actor"]))


def test_fused_and_naive_pairwise_give_the_same_losses(tiny):
    batch = make_batch(np.random.default_rng(3), tiny.batch_size)
    agent = mqe.Agent.create(0, batch, tiny)
    naive = dataclasses.replace(tiny, pairwise="naive")
    fused_loss, fused_info = critic_loss(agent.params, batch, tiny)
    naive_loss, naive_info = critic_loss(agent.params, batch, naive)
    assert float(fused_loss) == pytest.approx(float(naive_loss), rel=1e-5)


def test_update_many_equals_sequential_updates(tiny):
    rng = np.random.default_rng(4)
    batches = [make_batch(rng, tiny.batch_size) for _ in range(3)]
    agent = mqe.Agent.create(0, batches[0], tiny)
    sequential = agent
    for b in batches:
        sequential, _ = sequential.update(b)
    stacked = {k: np.stack([b[k] for b in batches]) for k in batches[0]}
    scanned, _ = agent.update_many(stacked)
    assert int(scanned.step) == 3
    for a, b in zip(jax.tree_util.tree_leaves(sequential.params), jax.tree_util.tree_leaves(scanned.params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_vmapped_seeds_equal_separate_training(tiny):
    rng = np.random.default_rng(5)
    batches = [[make_batch(rng, tiny.batch_size) for _ in range(2)] for _ in range(2)]  # [update][seed]
    example = batches[0][0]
    agents = mqe.create_seeds([0, 1], example, tiny)
    stacked = {k: np.stack([np.stack([b[k] for b in per_seed]) for per_seed in batches]) for k in example}
    trained, _ = mqe.update_many_seeds(agents, stacked)
    for seed in (0, 1):
        alone = mqe.Agent.create(seed, example, tiny)
        for update in range(2):
            alone, _ = alone.update(batches[update][seed])
        this_seed = jax.tree_util.tree_leaves(trained.params)
        for a, b in zip(jax.tree_util.tree_leaves(alone.params), this_seed, strict=True):
            b = b[seed]
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_sample_actions_and_distance(tiny):
    batch = make_batch(np.random.default_rng(6), tiny.batch_size)
    agent = mqe.Agent.create(0, batch, tiny)
    key = jax.random.PRNGKey(0)
    greedy = agent.sample_actions(batch["observations"], batch["goals"], key)
    assert greedy.shape == (tiny.batch_size, 2)
    np.testing.assert_array_equal(greedy, agent.sample_actions(batch["observations"], batch["goals"], jax.random.PRNGKey(1)))
    noisy = agent.sample_actions(batch["observations"], batch["goals"], key, temperature=5.0)
    assert float(jnp.abs(noisy).max()) <= 1.0 and not np.allclose(noisy, greedy)
    steps = agent.distance(batch["observations"], batch["goals"])
    assert steps.shape == (tiny.batch_size,) and bool(jnp.all(steps >= 0))


def test_pixel_agent_trains_on_uint8_images(tiny):
    config = dataclasses.replace(tiny, encoder="resnet_tiny", batch_size=4)
    rng = np.random.default_rng(7)
    img = lambda: rng.integers(0, 256, size=(4, 16, 16, 3), dtype=np.uint8)  # noqa: E731
    batch = {
        "observations": img(), "waypoints": img(), "goals": img(), "actor_goals": img(),
        "actions": rng.uniform(-1, 1, size=(4, 7)).astype(np.float32),
        "waypoint_offsets": np.array([1, 2, 3, 1], np.int32),
    }
    agent = mqe.Agent.create(0, batch, config)
    agent, info = agent.update(batch)
    assert np.isfinite(float(info["critic/loss"])) and np.isfinite(float(info["actor/loss"]))


@pytest.mark.parametrize("name", ["ogbench_state", "ogbench_pixel", "bridge", "sim", "tiny"])
def test_presets_build(name):
    config = mqe.get_config(name)
    obs = jnp.zeros((1, 128, 128, 3), jnp.uint8) if config.encoder else jnp.zeros((1, 40))
    shapes = jax.eval_shape(mqe.make_critic(config).init, jax.random.PRNGKey(0), obs, jnp.zeros((1, 7)))
    phi, psi = jax.eval_shape(
        lambda v: mqe.make_critic(config).apply(v, obs, jnp.zeros((1, 7))), shapes
    )
    assert phi.shape == (config.num_heads, 1, config.latent_dim) == psi.shape


def test_bridge_preset_matches_the_paper():
    c = mqe.get_config("bridge")
    assert (c.batch_size, c.latent_dim, tuple(c.critic_hidden_dims), c.gamma, c.lam, c.p_next) == (
        128, 256, (256, 256, 256), 0.98, 0.95, 0.2
    )
    assert c.encoder == "resnet34_bf16" and c.num_components == 8


def test_bad_configs_are_rejected_with_the_fix():
    with pytest.raises(ValueError, match="divisible by 2 \\* num_components"):
        dataclasses.replace(mqe.get_config("tiny"), latent_dim=60)
    with pytest.raises(ValueError, match="pairwise"):
        dataclasses.replace(mqe.get_config("tiny"), pairwise="fast")
    with pytest.raises(ValueError, match="unknown MQE preset 'bridg'"):
        mqe.get_config("bridg")
    with pytest.raises(ValueError, match="actor_p_random_goal 1.5: must be within"):
        dataclasses.replace(mqe.get_config("tiny"), actor_p_random_goal=1.5)


def _reference_total_loss(params, batch, config):
    """The losses written the plain way, each network call on its own inputs (no shared passes)."""
    critic = mqe.make_critic(config)
    v = {"params": params["critic"]}
    phi = critic.apply(v, batch["observations"], batch["actions"], method=Critic.phi)
    psi = lambda x, variables=v: critic.apply(variables, x, method=Critic.psi)  # noqa: E731
    psi_g, psi_w, psi_s = psi(batch["goals"]), psi(batch["waypoints"]), psi(batch["observations"])
    pairwise = mrn_pairwise_naive
    backup = backup_loss(pairwise(phi, psi_g, config.num_components), pairwise(psi_w, psi_g, config.num_components),
                         batch["waypoint_offsets"], config.gamma, config.linex_clip, config.diag_weight)
    c_loss = backup + config.zeta * invariance_loss(mrn_distance(psi_s, phi, config.num_components))
    mean = mqe.make_actor(config, batch["actions"].shape[-1]).apply(
        {"params": params["actor"]}, batch["observations"], batch["actor_goals"])
    frozen = {"params": jax.lax.stop_gradient(params["critic"])}
    phi_pi = critic.apply(frozen, batch["observations"], jnp.clip(mean, -1, 1), method=Critic.phi)
    q = -jnp.min(mrn_distance(phi_pi, psi(batch["actor_goals"], frozen), config.num_components), axis=0)
    q_loss = -jnp.mean(q) / jax.lax.stop_gradient(jnp.mean(jnp.abs(q)) + 1e-6)
    bc = -config.alpha * jnp.mean(gaussian_log_prob(mean, config.actor_std, batch["actions"]))
    return c_loss + q_loss + bc


@pytest.mark.parametrize("encoder", [None, "impala_tiny"])
def test_shared_critic_passes_change_neither_losses_nor_gradients(tiny, encoder):
    config = dataclasses.replace(tiny, encoder=encoder, batch_size=6)
    rng = np.random.default_rng(8)
    batch = make_batch(rng, config.batch_size)
    if encoder:
        for key in ("observations", "waypoints", "goals", "actor_goals"):
            batch[key] = rng.integers(0, 256, size=(6, 16, 16, 3), dtype=np.uint8)
    agent = mqe.Agent.create(0, batch, config)
    # Compiled, as training runs them: op by op, the impala encoder's gradients take minutes on a CPU.
    (loss, _), grads = jax.jit(jax.value_and_grad(agent.total_loss, has_aux=True))(agent.params, batch)
    reference = functools.partial(_reference_total_loss, config=config)
    ref_loss, ref_grads = jax.jit(jax.value_and_grad(reference))(agent.params, batch)
    assert float(loss) == pytest.approx(float(ref_loss), rel=1e-5)
    for got, want in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(ref_grads), strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-6)


def test_the_sim_presets_bf16_encoder_keeps_the_losses_of_float32_within_1e_3():
    config = dataclasses.replace(mqe.get_config("sim"), batch_size=8)
    assert config.encoder == "impala_small_bf16"
    float32 = dataclasses.replace(config, encoder="impala_small")
    rng = np.random.default_rng(0)
    frames = lambda: rng.integers(0, 256, (8, 32, 32, 3), dtype=np.uint8)  # noqa: E731
    batch = {"observations": frames(), "goals": frames(), "waypoints": frames(), "actor_goals": frames(),
             "actions": rng.uniform(-1, 1, (8, 7)).astype(np.float32),
             "waypoint_offsets": rng.integers(1, 10, 8).astype(np.int32)}
    agent = mqe.Agent.create(0, batch, float32)
    want, _ = agent.total_loss(agent.params, batch)
    got, _ = agent.replace(config=config).total_loss(agent.params, batch)
    assert float(got) != float(want)  # the convolutions did run in bf16
    assert float(got) == pytest.approx(float(want), rel=1e-3)
