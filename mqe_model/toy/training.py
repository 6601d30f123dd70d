"""What the toy problems share: an agent (MQE or GCIQL) trained offline on their data, goal-reaching
rollouts, the critic's distance in steps, and the critic's own greedy choice among candidate actions."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np

from mqe_model.data.dataset import Dataset

log = logging.getLogger(__name__)


TOY_AGENTS = ("mqe", "gciql")  # agents with a critic whose distance a toy can read


def agent_config_of(config):
    """A toy config's agent config: the `agent`'s (default MQE) `preset` with the toy's `gamma`, `alpha` and
    `lr`, then its `--set` overrides. Refuses (ValueError) an agent without a critic to read, or a `steps`
    that is not a whole number of `updates_per_dispatch`."""
    import dataclasses

    from mqe_model.agents import registry

    agent = getattr(config, "agent", "mqe")
    if agent not in TOY_AGENTS:
        raise ValueError(f"agent {agent!r}: the toys read a critic's distance, so choose one of {', '.join(TOY_AGENTS)}")
    if config.steps % config.updates_per_dispatch:
        raise ValueError(f"steps ({config.steps}) must be a multiple of updates_per_dispatch "
                         f"({config.updates_per_dispatch})")
    base = dataclasses.replace(registry.spec(agent).get_config(config.preset), gamma=config.gamma,
                               alpha=config.alpha, lr=config.lr)
    return registry.apply_overrides(base, config.set)


def agent_name(agent) -> str:
    """'mqe' or 'gciql', from the agent's class."""
    from mqe_model.agents import registry

    return next(name for name, s in registry.SPECS.items() if isinstance(agent, s.agent_class))


def train_agent(name: str, data: Dataset, agent_config, steps: int, updates_per_dispatch: int, seed: int,
                rng: np.random.Generator):
    """Agent `name` trained on `data` for `steps` updates, `updates_per_dispatch` per jitted call, with the
    trainer's own sampler (so `--set` sampler fields apply). Returns (agent, training seconds)."""
    import jax
    import jax.numpy as jnp

    from mqe_model.agents import registry

    sampler = registry.make_sampler(name, data, agent_config)
    k = updates_per_dispatch

    def stacked_batches() -> dict:
        batches = [sampler.sample(rng, agent_config.batch_size) for _ in range(k)]
        return {key: jnp.asarray(np.stack([b[key] for b in batches])) for key in batches[0]}

    agent = registry.spec(name).agent_class.create(seed, sampler.sample(rng, 2), agent_config)
    start = time.perf_counter()
    for i in range(steps // k):
        agent, info = agent.update_many(stacked_batches())
        if (i + 1) % max(1, (steps // k) // 4) == 0:
            losses = {key: float(v) for key, v in sorted(info.items()) if key.endswith(("/loss", "/backup"))}
            log.info("step %d: %s", (i + 1) * k, " ".join(f"{key} {v:.4f}" for key, v in losses.items()))
    jax.block_until_ready(agent.params)
    return agent, time.perf_counter() - start


def rollout_success(step: Callable[[np.ndarray, np.ndarray], np.ndarray], observe: Callable[[np.ndarray], np.ndarray],
                    act: Callable[[np.ndarray, np.ndarray], np.ndarray], starts: np.ndarray, goals: np.ndarray,
                    budget: int) -> float:
    """Fraction of (start, goal) pairs that `act(obs, goal_obs) -> actions` reaches within `budget`
    steps of `step(states, actions) -> states`; a reached goal ends that pair's rollout."""
    s = starts.copy()
    reached = s == goals
    goal_obs = observe(goals)
    for _ in range(budget):
        s = np.where(reached, s, step(s, act(observe(s), goal_obs)))
        reached |= s == goals
    return float(reached.mean())


def actor_policy(agent, seed: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The trained actor's deterministic actions."""
    import jax

    key = jax.random.PRNGKey(seed)
    return lambda obs, goal_obs: np.asarray(agent.sample_actions(obs, goal_obs, key))


def distance_steps(agent, observations: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """The critic's distance from each observation to its goal, in steps: MQE's `distance`, GCIQL's
    `steps_of_value` of V(s, g)."""
    if agent_name(agent) == "mqe":
        return np.asarray(agent.distance(observations, goals))
    from mqe_model.agents import gciql

    v = gciql.Value(agent.config).apply({"params": agent.params["value"]}, observations, goals)
    return steps_of_value(np.asarray(v), agent.config.gamma)


def steps_of_value(v: np.ndarray, gamma: float) -> np.ndarray:
    """The steps d whose reward of -1 a step is worth v: v = -(1 - gamma^d) / (1 - gamma), so
    d = log(1 + (1 - gamma) v) / log(gamma). A v above 0 reads as 0 steps; one at or below the floor
    -1 / (1 - gamma) (never reaching the goal) as the farthest that float64 tells apart."""
    left = np.clip(1.0 + (1.0 - gamma) * np.asarray(v, np.float64), np.finfo(np.float64).tiny, 1.0)  # gamma^d
    return np.log(left) / np.log(gamma)


def critic_greedy_policy(agent, candidates: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Of the (K, action_dim) `candidates`, the critic's best: for MQE the one whose d(phi(s, a), psi(g))
    is smallest, for GCIQL the one whose Q(s, a, g) (the smaller head) is largest: the critic's own
    read-out, with no actor in the way. One jitted call a step scores every candidate (run eagerly, a
    gridworld rollout took ~20 s)."""
    candidates = np.asarray(candidates, np.float32)
    costs = _candidate_costs(agent, candidates)
    return lambda obs, goal_obs: candidates[np.asarray(costs(obs, goal_obs)).argmin(axis=0)]


def action_distance_steps(agent, candidates: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The critic's distance through its best candidate action, in steps: for MQE min over `candidates` of
    d(phi(s, a), psi(g)) / -log(gamma), for GCIQL `steps_of_value` of the largest Q(s, a, g). Beside
    `distance_steps` (MQE: psi(s) to psi(g)) it tells whether phi holds what psi(s) does not."""
    costs = _candidate_costs(agent, np.asarray(candidates, np.float32))
    if agent_name(agent) == "mqe":
        return lambda obs, goal_obs: np.asarray(costs(obs, goal_obs)).min(axis=0) / agent.config.step_scale
    return lambda obs, goal_obs: steps_of_value(-np.asarray(costs(obs, goal_obs)).min(axis=0), agent.config.gamma)


def _candidate_costs(agent, candidates: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """(obs, goal_obs) -> (K, B) cost of each candidate action for each pair, in one jitted call:
    MQE's min over heads of d(phi(s, a), psi(g)), GCIQL's -min over heads of Q(s, a, g)."""
    import jax
    import jax.numpy as jnp

    cost = _mqe_action_costs(agent) if agent_name(agent) == "mqe" else _gciql_action_costs(agent)

    @jax.jit
    def all_costs(params, obs, goal_obs):
        def of_candidate(action):
            return cost(params, obs, goal_obs, jnp.broadcast_to(action, (obs.shape[0], action.size)))

        return jax.vmap(of_candidate)(jnp.asarray(candidates))

    return lambda obs, goal_obs: all_costs(agent.params["critic"], obs, goal_obs)


def _mqe_action_costs(agent):
    """(critic params, obs, goals, actions) -> min over heads of d(phi(s, a), psi(g))."""
    import jax.numpy as jnp

    from mqe_model.agents import mqe

    critic, config = mqe.Critic(agent.config), agent.config

    def cost(params, obs, goal_obs, actions):
        psi_g = critic.apply({"params": params}, goal_obs, method=mqe.Critic.psi)
        phi = critic.apply({"params": params}, obs, actions, method=mqe.Critic.phi)
        return jnp.min(mqe.mrn_distance(phi, psi_g, config.num_components), axis=0)

    return cost


def _gciql_action_costs(agent):
    """(critic params, obs, goals, actions) -> -min over heads of Q(s, a, g)."""
    import jax.numpy as jnp

    from mqe_model.agents import gciql

    critic = gciql.Critic(agent.config)
    return lambda params, obs, goal_obs, actions: -jnp.min(critic.apply({"params": params}, obs, goal_obs, actions),
                                                           axis=0)
