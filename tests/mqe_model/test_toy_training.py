import jax.numpy as jnp
import numpy as np

from mqe_model.agents import gciql, mqe
from mqe_model.toy.training import action_distance_steps, critic_greedy_policy, steps_of_value


def greedy_choice(agent_class, config, seed: int):
    """A freshly made agent on 8 random states and goals, 6 random candidate actions, and the greedy policy's
    choice among them: (agent, observations, goals, candidates, chosen)."""
    rng = np.random.default_rng(seed)
    observations, goals = rng.normal(size=(2, 8, 5)).astype(np.float32)
    batch = {"observations": observations, "actions": rng.uniform(-1, 1, size=(8, 2)).astype(np.float32)}
    agent = agent_class.create(0, batch, config)
    candidates = rng.uniform(-1, 1, size=(6, 2)).astype(np.float32)
    return agent, observations, goals, candidates, critic_greedy_policy(agent, candidates)(observations, goals)


def test_steps_of_value_inverts_the_value_of_d_steps():
    gamma = 0.95
    d = np.array([0.0, 1.0, 2.0, 7.0, 30.0])
    v = -(1.0 - gamma**d) / (1.0 - gamma)
    np.testing.assert_allclose(steps_of_value(v, gamma), d, atol=1e-9)
    assert steps_of_value(np.array([0.5]), gamma)[0] == 0.0  # above 0: at the goal
    floor = steps_of_value(np.array([-1.0 / (1.0 - gamma) - 1.0]), gamma)[0]
    assert np.isfinite(floor) and floor > 1000  # never reaching the goal reads as very far, not inf


def test_mqe_greedy_picks_the_candidate_of_least_distance():
    agent, observations, goals, candidates, chosen = greedy_choice(mqe.MQEAgent, mqe.get_config("tiny"), 0)
    critic, variables = mqe.Critic(agent.config), {"params": agent.params["critic"]}
    psi_g = critic.apply(variables, goals, method=mqe.Critic.psi)
    costs = np.stack([np.asarray(jnp.min(mqe.mrn_distance(
        critic.apply(variables, observations, np.tile(a, (8, 1)), method=mqe.Critic.phi), psi_g), axis=0))
        for a in candidates], -1)
    np.testing.assert_array_equal(chosen, candidates[costs.argmin(-1)])
    assert len({tuple(a) for a in chosen}) > 1  # the choice depends on the state: not one fixed candidate
    np.testing.assert_allclose(action_distance_steps(agent, candidates)(observations, goals),
                               costs.min(-1) / agent.config.step_scale, rtol=1e-6)


def test_gciql_greedy_picks_the_candidate_of_largest_q():
    agent, observations, goals, candidates, chosen = greedy_choice(gciql.GCIQLAgent, gciql.get_config("tiny"), 1)
    critic = gciql.Critic(agent.config)
    q = np.stack([np.asarray(jnp.min(critic.apply({"params": agent.params["critic"]}, observations, goals,
                                                  np.tile(a, (8, 1))), axis=0)) for a in candidates], -1)
    np.testing.assert_array_equal(chosen, candidates[q.argmax(-1)])
    np.testing.assert_allclose(action_distance_steps(agent, candidates)(observations, goals),
                               steps_of_value(q.max(-1), agent.config.gamma), rtol=1e-6)
