import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqe_model.agents import mqe
from mqe_model.agents.mqe import backup_loss, invariance_loss

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
    assert float(invariance_loss(d, "squared")) == pytest.approx(math.log(2.0) ** 2 / 2, rel=1e-6)


def test_the_squared_invariance_form_reaches_the_critic_loss(tiny):
    batch = make_batch(np.random.default_rng(13), tiny.batch_size)
    agent = mqe.MQEAgent.create(0, batch, tiny)
    _, exp_info = critic_loss(agent.params, batch, tiny)
    _, sq_info = critic_loss(agent.params, batch, dataclasses.replace(tiny, invariance_form="squared"))
    forward = mqe.critic_forward(agent.params["critic"], batch, tiny)
    d = mqe.mrn_distance(forward.psi_states, forward.phi, tiny.num_components)
    assert float(sq_info["critic/invariance"]) == pytest.approx(float(jnp.mean(jnp.square(d))), rel=1e-5)
    assert float(exp_info["critic/invariance"]) == pytest.approx(float(jnp.mean(jnp.square(jnp.exp(-d) - 1))), rel=1e-5)
    with pytest.raises(ValueError, match="invariance_form='l1': choose one of exp, squared"):
        dataclasses.replace(tiny, invariance_form="l1")


def test_an_invariance_that_moves_phi_alone_leaves_psi_to_the_backup(tiny):
    """invariance_moves='phi': L_I still moves phi(s, a), but psi gets exactly the backup's gradient, as with
    zeta = 0; with the paper's 'both' it moves psi too."""
    batch = make_batch(np.random.default_rng(17), tiny.batch_size)
    params = mqe.MQEAgent.create(0, batch, tiny).params
    grads = {name: loss_grads(critic_loss, config)(params, batch)["critic"] for name, config in (
        ("both", tiny), ("phi", dataclasses.replace(tiny, invariance_moves="phi")),
        ("backup", dataclasses.replace(tiny, zeta=0.0)))}
    for net, same_as_backup in (("psi_net", {"phi": True, "both": False}), ("phi_net", {"phi": False, "both": False})):
        for moves, same in same_as_backup.items():
            pairs = zip(jax.tree_util.tree_leaves(grads[moves][net]), jax.tree_util.tree_leaves(grads["backup"][net]),
                        strict=True)
            assert all(np.allclose(a, b, rtol=1e-5, atol=1e-8) for a, b in pairs) == same, (net, moves)
    with pytest.raises(ValueError, match="invariance_moves='psi': choose one of both, phi"):
        dataclasses.replace(tiny, invariance_moves="psi")


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
    agent = mqe.MQEAgent.create(0, batch, tiny)
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
    agent = mqe.MQEAgent.create(0, batch, tiny)
    grads = loss_grads(actor_loss, tiny)(agent.params, batch)
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree_util.tree_leaves(grads["critic"]))
    assert any(float(jnp.abs(g).max()) > 0.0 for g in jax.tree_util.tree_leaves(grads["actor"]))


@pytest.mark.parametrize(("heads", "reduce"), [("nearest", np.min), ("farthest", np.max)])
def test_actor_q_takes_the_chosen_head(tiny, heads, reduce):
    config = dataclasses.replace(tiny, actor_heads=heads)
    batch = make_batch(np.random.default_rng(4), config.batch_size)
    agent = mqe.MQEAgent.create(0, batch, config)
    _, info = actor_loss(agent.params, batch, config)
    mean = mqe.Actor(config, 2).apply({"params": agent.params["actor"]}, batch["observations"], batch["actor_goals"])
    critic, frozen = mqe.Critic(config), {"params": agent.params["critic"]}
    phi = critic.apply(frozen, batch["observations"], jnp.clip(mean, -1, 1), method=mqe.Critic.phi)
    per_head = np.asarray(mqe.mrn_distance(phi, critic.apply(frozen, batch["actor_goals"], method=mqe.Critic.psi),
                                           config.num_components))
    assert per_head.shape[0] == 2 and not np.allclose(per_head[0], per_head[1])
    assert float(info["actor/q"]) == pytest.approx(-reduce(per_head, axis=0).mean(), rel=1e-5)


def test_unknown_actor_heads_are_refused(tiny):
    with pytest.raises(ValueError, match="actor_heads='mean': choose one of nearest, farthest"):
        dataclasses.replace(tiny, actor_heads="mean")


def test_all_goal_pairs_average_the_q_of_every_state_with_every_goal(tiny):
    """The paper's L_mu: the q term over all B x B (state i, goal j) pairs is the mean of the own-pair q
    over the B cyclic shifts of the goals (each pair once); the BC term stays on the own pairs."""
    config = dataclasses.replace(tiny, batch_size=8)
    all_pairs = dataclasses.replace(config, actor_goal_pairs="all")
    batch = make_batch(np.random.default_rng(6), config.batch_size)
    agent = mqe.MQEAgent.create(0, batch, config)
    _, info = actor_loss(agent.params, batch, all_pairs)
    shifted = [actor_loss(agent.params, {**batch, "actor_goals": np.roll(batch["actor_goals"], k, axis=0)},
                              config)[1] for k in range(config.batch_size)]
    assert float(info["actor/q"]) == pytest.approx(np.mean([float(i["actor/q"]) for i in shifted]), rel=1e-5)
    for key in ("actor/bc_loss", "actor/mse", "actor/log_prob"):
        assert float(info[key]) == pytest.approx(float(shifted[0][key]), rel=1e-5)
    grads = loss_grads(actor_loss, all_pairs)(agent.params, batch)
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree_util.tree_leaves(grads["critic"]))


def test_sampled_goal_pairs_weight_the_own_goal_one_in_b_and_k_minus_1_next_rows_the_rest(tiny):
    """'sampled' with K goals per state: q = (1/B) q(own goals) + (1 - 1/B) mean over shifts 1..K-1 of
    q(goals of row i + k): the expectation of 'all' over i.i.d. rows. The BC term stays on the own pairs."""
    config = dataclasses.replace(tiny, batch_size=8)
    sampled = dataclasses.replace(config, actor_goal_pairs="sampled", actor_goal_samples=3)
    batch = make_batch(np.random.default_rng(7), config.batch_size)
    agent = mqe.MQEAgent.create(0, batch, config)
    _, info = actor_loss(agent.params, batch, sampled)
    shifted = [float(actor_loss(agent.params, {**batch, "actor_goals": np.roll(batch["actor_goals"], -k, axis=0)},
                                    config)[1]["actor/q"]) for k in range(3)]
    expected = shifted[0] / 8 + (1 - 1 / 8) * np.mean(shifted[1:])
    assert float(info["actor/q"]) == pytest.approx(expected, rel=1e-5)
    own_info = actor_loss(agent.params, batch, config)[1]
    for key in ("actor/bc_loss", "actor/mse", "actor/log_prob"):
        assert float(info[key]) == pytest.approx(float(own_info[key]), rel=1e-5)


def test_sampled_goal_pairs_with_every_row_are_all_pairs(tiny):
    config = dataclasses.replace(tiny, batch_size=6)
    all_pairs = dataclasses.replace(config, actor_goal_pairs="all")
    sampled = dataclasses.replace(config, actor_goal_pairs="sampled", actor_goal_samples=6)
    batch = make_batch(np.random.default_rng(8), config.batch_size)
    agent = mqe.MQEAgent.create(0, batch, config)
    (loss_all, info_all), grads_all = actor_loss_and_grads(agent.params, batch, all_pairs)
    (loss_k, info_k), grads_k = actor_loss_and_grads(agent.params, batch, sampled)
    assert float(loss_k) == pytest.approx(float(loss_all), rel=1e-5)
    assert float(info_k["actor/q"]) == pytest.approx(float(info_all["actor/q"]), rel=1e-5)
    for g_all, g_k in zip(jax.tree_util.tree_leaves(grads_all), jax.tree_util.tree_leaves(grads_k), strict=True):
        np.testing.assert_allclose(np.asarray(g_k), np.asarray(g_all), rtol=1e-4, atol=1e-6)


def test_bc_on_own_goals_only_clones_the_rows_whose_goal_is_their_own_future(tiny):
    """actor_bc_on_random_goals=False: BC is -alpha * the mean log-likelihood over the own-goal rows;
    the random-goal rows' actions do not enter it, and the q term is unchanged."""
    config = dataclasses.replace(tiny, batch_size=8, alpha=0.5, actor_p_random_goal=0.5)
    own_only = dataclasses.replace(config, actor_bc_on_random_goals=False)
    rng = np.random.default_rng(9)
    batch = {**make_batch(rng, 8), "actor_goal_own": np.array([1, 0, 1, 1, 0, 0, 1, 0], np.float32)}
    agent = mqe.MQEAgent.create(0, batch, config)
    _, info = actor_loss(agent.params, batch, own_only)
    mean = mqe.Actor(config, 2).apply({"params": agent.params["actor"]}, batch["observations"], batch["actor_goals"])
    log_prob = -0.5 * np.sum(np.square(batch["actions"] - np.asarray(mean)), axis=-1) - np.log(2 * np.pi)  # std 1, A = 2
    own = batch["actor_goal_own"] == 1
    assert float(info["actor/bc_loss"]) == pytest.approx(-0.5 * log_prob[own].mean(), rel=1e-5)
    assert float(info["actor/q"]) == pytest.approx(float(actor_loss(agent.params, batch, config)[1]["actor/q"]), rel=1e-6)
    other_actions = batch["actions"].copy()
    other_actions[~own] = rng.uniform(-1, 1, size=(int((~own).sum()), 2))
    loss, _ = actor_loss(agent.params, batch, own_only)
    moved, _ = actor_loss(agent.params, {**batch, "actions": other_actions}, own_only)
    assert float(moved) == pytest.approx(float(loss), rel=1e-6)  # random-goal rows are not cloned
    assert float(actor_loss(agent.params, {**batch, "actions": other_actions}, config)[0]) != pytest.approx(float(loss))


def test_bc_on_own_goals_only_needs_some_random_and_some_own_goals(tiny):
    for p in (0.0, 1.0):
        with pytest.raises(ValueError, match="needs 0 < actor_p_random_goal < 1"):
            dataclasses.replace(tiny, actor_p_random_goal=p, actor_bc_on_random_goals=False)


def test_the_sampler_marks_own_goals_when_bc_skips_random_ones(tiny):
    """The registry's sampler adds `actor_goal_own` (1: a future state of the row's own trajectory)
    exactly when the config keeps BC off random goals, and it is right on every row."""
    from mqe_model.agents import registry
    from mqe_model.data.dataset import Dataset

    lengths = [5, 9, 4]
    terminals = np.concatenate([np.arange(n) == n - 1 for n in lengths])
    trajectory = np.concatenate([np.full(n, k) for k, n in enumerate(lengths)])
    position = np.concatenate([np.arange(n) for n in lengths])
    observations = np.stack([trajectory, position, np.zeros_like(position)], axis=1).astype(np.float32)
    data = Dataset(observations, np.zeros((len(position), 2), np.float32), terminals)
    config = dataclasses.replace(tiny, actor_p_random_goal=0.5)
    plain = registry.make_sampler("mqe", data, config).sample(np.random.default_rng(0), 64)
    assert "actor_goal_own" not in plain
    batch = registry.make_sampler("mqe", data, dataclasses.replace(config, actor_bc_on_random_goals=False)
                                  ).sample(np.random.default_rng(0), 4000)
    s, g, own = batch["observations"], batch["actor_goals"], batch["actor_goal_own"]
    assert set(np.unique(own)) == {0.0, 1.0} and own.mean() == pytest.approx(0.5, abs=0.04)
    future = (g[:, 0] == s[:, 0]) & (g[:, 1] > s[:, 1])
    assert np.all(future[own == 1])  # an own goal is always a future state of the row's trajectory
    assert future[own == 0].mean() < 0.5  # random goals mostly are not


@pytest.mark.parametrize("heads", mqe.ACTOR_HEADS)
def test_distance_pairs_score_the_own_goals_action_against_every_goal(tiny, heads):
    """'distances': the action is pi(s_i, g_i) and q the mean of -d((s_i, a_i), g_j) over every (i, j),
    written here as the mean over the B cyclic shifts of the goals' psi; only the actor learns."""
    config = dataclasses.replace(tiny, batch_size=8, actor_heads=heads)
    distances = dataclasses.replace(config, actor_goal_pairs="distances")
    batch = make_batch(np.random.default_rng(9), config.batch_size)
    agent = mqe.MQEAgent.create(0, batch, config)
    frozen = {"params": agent.params["critic"]}
    actions = jnp.clip(mqe.Actor(config, 2).apply({"params": agent.params["actor"]}, batch["observations"],
                                                   batch["actor_goals"]), -1.0, 1.0)
    phi = mqe.Critic(config).apply(frozen, batch["observations"], actions, method=mqe.Critic.phi_of_features)
    psi = mqe.Critic(config).apply(frozen, batch["actor_goals"], method=mqe.Critic.psi)
    expected = np.mean([-np.asarray(mqe.actor_distance(phi, jnp.roll(psi, -k, axis=1), config))
                        for k in range(config.batch_size)])
    _, info = actor_loss(agent.params, batch, distances)
    assert float(info["actor/q"]) == pytest.approx(float(expected), rel=1e-5)
    own_info = actor_loss(agent.params, batch, config)[1]
    assert float(info["actor/bc_loss"]) == pytest.approx(float(own_info["actor/bc_loss"]), rel=1e-6)
    grads = loss_grads(actor_loss, distances)(agent.params, batch)
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree_util.tree_leaves(grads["critic"]))
    assert any(float(jnp.abs(g).max()) > 0.0 for g in jax.tree_util.tree_leaves(grads["actor"]))


@settings(max_examples=40, deadline=None)
@given(batch_size=st.integers(2, 300), data=st.data())
def test_pair_weights_sum_to_one_and_give_the_own_pairs_one_in_b(batch_size, data):
    per_state = data.draw(st.integers(2, batch_size))
    weights = np.asarray(mqe.pair_weights(batch_size, per_state), dtype=np.float64)
    assert weights.shape == (per_state * batch_size,)
    assert weights.sum() == pytest.approx(1.0, rel=1e-5)
    assert weights[:batch_size].sum() == pytest.approx(1.0 / batch_size, rel=1e-5)


def test_goal_pairs_refuse_an_image_encoder_unknown_values_and_bad_sample_counts(tiny):
    for pairs in ("all", "sampled"):
        with pytest.raises(ValueError, match="state-based presets only"):
            dataclasses.replace(mqe.get_config("sim"), actor_goal_pairs=pairs)
    assert dataclasses.replace(mqe.get_config("sim"), actor_goal_pairs="distances").goals_per_state == 1
    with pytest.raises(ValueError, match="choose one of own, all, sampled, distances"):
        dataclasses.replace(tiny, actor_goal_pairs="some")
    for samples in (1, tiny.batch_size + 1):
        with pytest.raises(ValueError, match=f"actor_goal_samples={samples}: must be within 2..batch_size"):
            dataclasses.replace(tiny, actor_goal_pairs="sampled", actor_goal_samples=samples)
    assert dataclasses.replace(tiny, actor_goal_samples=1).goals_per_state == 1  # unused unless 'sampled'


def test_invariance_over_all_actions_is_the_papers_sum_over_every_state_action_pair(tiny):
    """invariance_actions = B: L_I is the mean of (exp(-d(psi(s_i), phi(s_i, a_j))) - 1)^2 over all B x B
    pairs (the paper's equation), written here with one explicit phi call per pair; the backup is unchanged."""
    config = dataclasses.replace(tiny, batch_size=5)
    all_actions = dataclasses.replace(config, invariance_actions=5)
    batch = make_batch(np.random.default_rng(11), config.batch_size)
    agent = mqe.MQEAgent.create(0, batch, config)
    critic, v = mqe.Critic(config), {"params": agent.params["critic"]}
    psi_s = critic.apply(v, batch["observations"], method=mqe.Critic.psi)
    terms = []
    for i in range(5):
        for j in range(5):
            phi_ij = critic.apply(v, batch["observations"][i:i + 1], batch["actions"][j:j + 1], method=mqe.Critic.phi)
            d = mqe.mrn_distance(psi_s[:, i:i + 1], phi_ij, config.num_components)
            terms.append(np.square(np.exp(-np.asarray(d)) - 1.0))
    _, info = critic_loss(agent.params, batch, all_actions)
    _, own = critic_loss(agent.params, batch, config)
    assert float(info["critic/invariance"]) == pytest.approx(float(np.mean(terms)), rel=1e-5)
    assert float(info["critic/backup"]) == pytest.approx(float(own["critic/backup"]), rel=1e-6)
    assert float(info["critic/dist_invariance"]) == pytest.approx(float(own["critic/dist_invariance"]), rel=1e-6)
    assert "critic/dist_invariance_others" in info and "critic/dist_invariance_others" not in own


def test_invariance_with_n_actions_averages_n_cyclic_shifts_of_the_actions(tiny):
    """invariance_actions = n: the own-action L_I averaged over the batches whose actions are shifted by
    0 .. n - 1 places, so state i meets a_i, ..., a_{i+n-1}; gradients flow into the critic as for own actions."""
    config = dataclasses.replace(tiny, batch_size=8)
    three = dataclasses.replace(config, invariance_actions=3)
    batch = make_batch(np.random.default_rng(12), config.batch_size)
    agent = mqe.MQEAgent.create(0, batch, config)
    shifted = [critic_loss(agent.params, {**batch, "actions": np.roll(batch["actions"], -k, axis=0)}, config)[1]
               for k in range(3)]
    _, info = critic_loss(agent.params, batch, three)
    assert float(info["critic/invariance"]) == pytest.approx(
        np.mean([float(i["critic/invariance"]) for i in shifted]), rel=1e-5)
    assert float(info["critic/dist_invariance_others"]) == pytest.approx(
        np.mean([float(i["critic/dist_invariance"]) for i in shifted[1:]]), rel=1e-5)
    grads = loss_grads(critic_loss, three)(agent.params, batch)
    own_grads = loss_grads(critic_loss, config)(agent.params, batch)
    phi_kernel = lambda g: np.asarray(jax.tree_util.tree_leaves(g["critic"]["phi_net"])[0])  # noqa: E731
    assert not np.allclose(phi_kernel(grads), phi_kernel(own_grads))
    _, metrics = agent.replace(config=three).update(batch)
    assert np.isfinite(float(metrics["critic/dist_invariance_others"]))


def test_invariance_actions_outside_one_to_batch_size_are_refused(tiny):
    for bad in (0, tiny.batch_size + 1):
        with pytest.raises(ValueError, match=f"invariance_actions={bad}: must be within 1..batch_size"):
            dataclasses.replace(tiny, invariance_actions=bad)


def test_the_flat_optimizer_takes_the_same_steps(tiny):
    """optax.flatten(adam) on the raveled parameters: the same Adam arithmetic, so the same parameters
    after several updates (to float32 rounding), through update_many's scan too."""
    rng = np.random.default_rng(14)
    batches = [make_batch(rng, tiny.batch_size) for _ in range(3)]
    agents = [mqe.MQEAgent.create(0, batches[0], dataclasses.replace(tiny, flat_optimizer=flat)) for flat in (False, True)]
    stacked = jax.tree_util.tree_map(lambda *x: np.stack(x), *batches)
    results = [agent.update_many(stacked)[0] for agent in agents]
    for tree, flat in zip(*(jax.tree_util.tree_leaves(r.params) for r in results), strict=True):
        np.testing.assert_allclose(flat, tree, rtol=1e-5, atol=1e-6)
    assert not np.allclose(jax.tree_util.tree_leaves(results[1].params)[0], jax.tree_util.tree_leaves(agents[1].params)[0])
    assert len(jax.tree_util.tree_leaves(results[1].opt_state)) < len(jax.tree_util.tree_leaves(results[0].opt_state))


def test_critic_loss_sends_no_gradient_into_the_actor(tiny):
    batch = make_batch(np.random.default_rng(2), tiny.batch_size)
    agent = mqe.MQEAgent.create(0, batch, tiny)
    grads = loss_grads(critic_loss, tiny)(agent.params, batch)
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree_util.tree_leaves(grads["actor"]))


def test_fused_and_naive_pairwise_give_the_same_losses(tiny):
    batch = make_batch(np.random.default_rng(3), tiny.batch_size)
    agent = mqe.MQEAgent.create(0, batch, tiny)
    naive = dataclasses.replace(tiny, pairwise="naive")
    fused_loss, fused_info = critic_loss(agent.params, batch, tiny)
    naive_loss, naive_info = critic_loss(agent.params, batch, naive)
    assert float(fused_loss) == pytest.approx(float(naive_loss), rel=1e-5)


def test_update_many_equals_sequential_updates(tiny):
    rng = np.random.default_rng(4)
    batches = [make_batch(rng, tiny.batch_size) for _ in range(3)]
    agent = mqe.MQEAgent.create(0, batches[0], tiny)
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
        alone = mqe.MQEAgent.create(seed, example, tiny)
        for update in range(2):
            alone, _ = alone.update(batches[update][seed])
        this_seed = jax.tree_util.tree_leaves(trained.params)
        for a, b in zip(jax.tree_util.tree_leaves(alone.params), this_seed, strict=True):
            b = b[seed]
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_sample_actions_and_distance(tiny):
    batch = make_batch(np.random.default_rng(6), tiny.batch_size)
    agent = mqe.MQEAgent.create(0, batch, tiny)
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
    agent = mqe.MQEAgent.create(0, batch, config)
    agent, info = agent.update(batch)
    assert np.isfinite(float(info["critic/loss"])) and np.isfinite(float(info["actor/loss"]))


@pytest.mark.parametrize("name", ["ogbench_state", "ogbench_pixel", "bridge", "sim", "tiny"])
def test_presets_build(name):
    config = mqe.get_config(name)
    obs = jnp.zeros((1, 128, 128, 3), jnp.uint8) if config.encoder else jnp.zeros((1, 40))
    shapes = jax.eval_shape(mqe.Critic(config).init, jax.random.PRNGKey(0), obs, jnp.zeros((1, 7)))
    phi, psi = jax.eval_shape(
        lambda v: mqe.Critic(config).apply(v, obs, jnp.zeros((1, 7))), shapes
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
    critic = mqe.Critic(config)
    v = {"params": params["critic"]}
    phi = critic.apply(v, batch["observations"], batch["actions"], method=mqe.Critic.phi)
    psi = lambda x, variables=v: critic.apply(variables, x, method=mqe.Critic.psi)  # noqa: E731
    psi_g, psi_w, psi_s = psi(batch["goals"]), psi(batch["waypoints"]), psi(batch["observations"])
    pairwise = mqe.mrn_pairwise_naive
    backup = backup_loss(pairwise(phi, psi_g, config.num_components), pairwise(psi_w, psi_g, config.num_components),
                         batch["waypoint_offsets"], config.gamma, config.linex_clip, config.diag_weight)
    c_loss = backup + config.zeta * invariance_loss(mqe.mrn_distance(psi_s, phi, config.num_components))
    mean = mqe.Actor(config, batch["actions"].shape[-1]).apply(
        {"params": params["actor"]}, batch["observations"], batch["actor_goals"])
    frozen = {"params": jax.lax.stop_gradient(params["critic"])}
    phi_pi = critic.apply(frozen, batch["observations"], jnp.clip(mean, -1, 1), method=mqe.Critic.phi)
    q = -jnp.min(mqe.mrn_distance(phi_pi, psi(batch["actor_goals"], frozen), config.num_components), axis=0)
    q_loss = -jnp.mean(q) / jax.lax.stop_gradient(jnp.mean(jnp.abs(q)) + 1e-6)
    bc = -config.alpha * jnp.mean(mqe.gaussian_log_prob(mean, config.actor_std, batch["actions"]))
    return c_loss + q_loss + bc


@pytest.mark.parametrize("encoder", [None, "impala_tiny"])
def test_shared_critic_passes_change_neither_losses_nor_gradients(tiny, encoder):
    config = dataclasses.replace(tiny, encoder=encoder, batch_size=6)
    rng = np.random.default_rng(8)
    batch = make_batch(rng, config.batch_size)
    if encoder:
        for key in ("observations", "waypoints", "goals", "actor_goals"):
            batch[key] = rng.integers(0, 256, size=(6, 16, 16, 3), dtype=np.uint8)
    agent = mqe.MQEAgent.create(0, batch, config)
    # Compiled, as training runs them: op by op, the impala encoder's gradients take minutes on a CPU.
    (loss, _), grads = jax.jit(jax.value_and_grad(agent.total_loss, has_aux=True))(agent.params, batch)
    reference = functools.partial(_reference_total_loss, config=config)
    ref_loss, ref_grads = jax.jit(jax.value_and_grad(reference))(agent.params, batch)
    assert float(loss) == pytest.approx(float(ref_loss), rel=1e-5)
    for got, want in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(ref_grads), strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-6)
