"""What the toy problems share: MQE trained offline on their data, goal-reaching rollouts, and the
critic's own greedy choice among a set of candidate actions."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np

from mqe_model.data.dataset import Dataset

log = logging.getLogger(__name__)


def agent_config_of(config):
    """A toy config's MQE config: its `preset` with its `gamma`, `alpha` and `lr`, then its `--set` overrides.
    Refuses (ValueError) a `steps` that is not a whole number of `updates_per_dispatch`."""
    import dataclasses

    from mqe_model.agents import mqe, registry

    if config.steps % config.updates_per_dispatch:
        raise ValueError(f"steps ({config.steps}) must be a multiple of updates_per_dispatch "
                         f"({config.updates_per_dispatch})")
    base = dataclasses.replace(mqe.get_config(config.preset), gamma=config.gamma, alpha=config.alpha, lr=config.lr)
    return registry.apply_overrides(base, config.set)


def train_mqe(data: Dataset, agent_config, steps: int, updates_per_dispatch: int, seed: int,
              rng: np.random.Generator):
    """MQE trained on `data` for `steps` updates, `updates_per_dispatch` per jitted call, with the
    trainer's own sampler (so `--set` sampler fields apply). Returns (agent, training seconds)."""
    import jax
    import jax.numpy as jnp

    from mqe_model.agents import mqe, registry

    sampler = registry.make_sampler("mqe", data, agent_config)
    k = updates_per_dispatch

    def stacked_batches() -> dict:
        batches = [sampler.sample(rng, agent_config.batch_size) for _ in range(k)]
        return {key: jnp.asarray(np.stack([b[key] for b in batches])) for key in batches[0]}

    agent = mqe.MQEAgent.create(seed, sampler.sample(rng, 2), agent_config)
    start = time.perf_counter()
    for i in range(steps // k):
        agent, info = agent.update_many(stacked_batches())
        if (i + 1) % max(1, (steps // k) // 4) == 0:
            log.info("step %d: backup %.4f invariance %.4f actor q %.4f", (i + 1) * k, info["critic/backup"],
                     info["critic/invariance"], info["actor/q"])
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


def critic_greedy_policy(agent, candidates: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Of the (K, action_dim) `candidates`, the one whose d(phi(s, a), psi(g)) is smallest (the max-Q
    action): the critic's own read-out, with no actor in the way."""
    import jax.numpy as jnp

    from mqe_model.agents import mqe

    critic = mqe.Critic(agent.config)
    variables = {"params": agent.params["critic"]}
    candidates = np.asarray(candidates, np.float32)

    def act(obs: np.ndarray, goal_obs: np.ndarray) -> np.ndarray:
        psi_g = critic.apply(variables, jnp.asarray(goal_obs), method=mqe.Critic.psi)
        per_candidate = []
        for a in candidates:
            phi = critic.apply(variables, jnp.asarray(obs), jnp.broadcast_to(jnp.asarray(a), (obs.shape[0], a.size)),
                               method=mqe.Critic.phi)
            per_candidate.append(jnp.min(mqe.mrn_distance(phi, psi_g, agent.config.num_components), axis=0))
        return candidates[np.asarray(jnp.argmin(jnp.stack(per_candidate, -1), axis=-1))]

    return act
