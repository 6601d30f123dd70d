"""Goal-conditioned implicit Q-learning (GCIQL): the whole agent in one file.

Sparse goal-reaching reward: 0 when the state is the goal, -1 otherwise (mask 0 at the goal).
V(s, g) is fitted by expectile regression towards min of the target Q heads; Q(s, a, g) towards
r + gamma * mask * V(s', g); the actor by advantage-weighted regression (AWR), weights
exp(temperature * (Q - V)) capped at 100, as BridgeData V2's GCIQL. Target Q by Polyak averaging.
With an image encoder each network has its own encoder over observation and goal stacked
channel-wise (early fusion, not shared, as BridgeData V2).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from mqe_model.agents import scan_updates
from mqe_model.data.dataset import Dataset
from mqe_model.data.relabel import RelabelConfig, RelabelSampler
from mqe_model.data.sampling import check_probability
from mqe_model.networks.encoders import make_encoder
from mqe_model.networks.mlp import (
    MLP,
    GaussianActorHead,
    ensemble,
    gaussian_log_prob,
    sample_gaussian,
)

Batch = dict[str, jax.Array]
HAS_DISTANCE = False  # the act answers NaN for the distance: no quasimetric critic
REMOVED_FIELDS: dict[str, Any] = {}  # config fields older checkpoints may carry (see mqe.REMOVED_FIELDS)


@dataclasses.dataclass(frozen=True)
class Config:
    """Hyperparameters of GCIQL; presets come from `get_config(name)`."""

    name: str = "ogbench_state"  # preset this config came from
    lr: float = 3e-4  # Adam learning rate for all networks
    batch_size: int = 256  # samples per update
    value_hidden_dims: Sequence[int] = (512, 512, 512)  # V and Q MLP widths
    actor_hidden_dims: Sequence[int] = (512, 512, 512)  # policy MLP widths
    layer_norm: bool = True  # LayerNorm after each hidden GELU of V and Q
    actor_layer_norm: bool = True  # LayerNorm in the policy MLP too (OGBench's actors have none)
    gamma: float = 0.99  # discount per step
    expectile: float = 0.9  # expectile of the value regression
    actor_loss: str = "awr"  # policy extraction: 'awr' (advantage-weighted BC) or 'ddpgbc' (OGBench's DDPG+BC)
    temperature: float = 1.0  # AWR inverse temperature: weights exp(temperature * advantage)
    alpha: float = 1.0  # DDPG+BC behaviour-cloning weight (OGBench: pointmaze 0.003, play 1.0, noisy 0.03)
    tau: float = 0.005  # Polyak rate of the target Q network per update
    actor_std: float = 1.0  # constant standard deviation of the Gaussian policy
    p_current_goal: float = 0.2  # value goals: probability the goal is the state itself
    p_trajectory_goal: float = 0.5  # value goals: probability of a Geom(1 - gamma) future state
    p_random_goal: float = 0.3  # value goals: probability of a random dataset state
    actor_p_random_goal: float = 0.0  # chance an actor goal is a random state, not a future one (OGBench stitch: 0.5)
    encoder: str | None = None  # image encoder (early fusion per network) or None for states

    def __post_init__(self) -> None:
        total = self.p_current_goal + self.p_trajectory_goal + self.p_random_goal
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"p_current_goal + p_trajectory_goal + p_random_goal = {total}; must be 1")
        if not (0 < self.gamma < 1 and 0 < self.expectile < 1 and 0 < self.tau <= 1):
            raise ValueError("need 0 < gamma < 1, 0 < expectile < 1 and 0 < tau <= 1")
        check_probability("actor_p_random_goal", self.actor_p_random_goal)
        if self.actor_loss not in ACTOR_LOSSES:
            raise ValueError(f"actor_loss={self.actor_loss!r}: choose one of {', '.join(ACTOR_LOSSES)}")
        if self.alpha < 0:
            raise ValueError(f"alpha={self.alpha}: the behaviour-cloning weight must be >= 0")


class GoalFeatures(nn.Module):
    """Features of (observation, goal): an early-fusion image encoder or a plain concatenation."""

    encoder: str | None

    @nn.compact
    def __call__(self, observations: jax.Array, goals: jax.Array) -> jax.Array:
        stacked = jnp.concatenate([observations, goals], axis=-1)
        encoder = make_encoder(self.encoder)
        return stacked if encoder is None else encoder(stacked)


class Value(nn.Module):
    """V(s, g), one head."""

    config: Config

    @nn.compact
    def __call__(self, observations: jax.Array, goals: jax.Array) -> jax.Array:
        c = self.config
        features = GoalFeatures(c.encoder)(observations, goals)
        return MLP(c.value_hidden_dims, 1, c.layer_norm)(features)[..., 0]


class Critic(nn.Module):
    """Q(s, a, g), two ensemble heads over one encoder: (2, B)."""

    config: Config

    @nn.compact
    def __call__(self, observations: jax.Array, goals: jax.Array, actions: jax.Array) -> jax.Array:
        c = self.config
        features = GoalFeatures(c.encoder)(observations, goals)
        heads = ensemble(MLP, 2)(c.value_hidden_dims, 1, c.layer_norm)
        return heads(jnp.concatenate([features, actions], axis=-1))[..., 0]


class Actor(nn.Module):
    """Policy mean from (observation, goal)."""

    config: Config
    action_dim: int

    @nn.compact
    def __call__(self, observations: jax.Array, goals: jax.Array) -> jax.Array:
        c = self.config
        features = GoalFeatures(c.encoder)(observations, goals)
        return GaussianActorHead(c.actor_hidden_dims, self.action_dim, c.actor_layer_norm)(features)


def actor_mean(params: Any, observations: jax.Array, goals: jax.Array, config: Config,
               action_dim: int) -> jax.Array:
    """The policy mean (unclipped, normalized action units) for inference."""
    return Actor(config, action_dim).apply({"params": params["actor"]}, observations, goals)


def expectile_loss(diff: jax.Array, expectile: float) -> jax.Array:
    """Asymmetric squared loss: weight `expectile` where diff >= 0, 1 - expectile elsewhere."""
    weight = jnp.where(diff >= 0, expectile, 1.0 - expectile)
    return weight * jnp.square(diff)


def losses(params: Any, target_critic: Any, batch: Batch, config: Config) -> tuple[jax.Array, dict]:
    """Value + critic + actor losses (each network only gets its own loss's gradient)."""
    c = config
    obs, actions = batch["observations"], batch["actions"]
    value, critic = Value(c), Critic(c)
    # Value: expectile regression towards the target Q.
    q_target = jnp.min(critic.apply({"params": target_critic}, obs, batch["value_goals"], actions), 0)
    v = value.apply({"params": params["value"]}, obs, batch["value_goals"])
    value_loss = expectile_loss(q_target - v, c.expectile).mean()
    # Critic: one-step backup through V(s', g), with no gradient into V.
    next_v = value.apply({"params": jax.lax.stop_gradient(params["value"])},
                         batch["next_observations"], batch["value_goals"])
    backup = batch["rewards"] + c.gamma * batch["masks"] * next_v
    q = critic.apply({"params": params["critic"]}, obs, batch["value_goals"], actions)
    critic_loss = jnp.square(q - backup[None]).sum(0).mean()
    # Actor: on the actor goals, critic and value frozen.
    frozen = jax.lax.stop_gradient({"critic": params["critic"], "value": params["value"]})
    actor_loss, actor_info = ACTOR_LOSSES[c.actor_loss](params, frozen, batch, c)
    info = {
        "value/loss": value_loss, "value/v": v.mean(),
        "critic/loss": critic_loss, "critic/q": q.mean(), **actor_info,
    }
    return value_loss + critic_loss + actor_loss, info


def awr_actor_loss(params: Any, frozen: Any, batch: Batch, c: Config) -> tuple[jax.Array, dict]:
    """Advantage-weighted regression on the actor goals: -mean(min(exp(T (Q - V)), 100) log pi(a))."""
    obs, actions, goals = batch["observations"], batch["actions"], batch["actor_goals"]
    q_pi = jnp.min(Critic(c).apply({"params": frozen["critic"]}, obs, goals, actions), 0)
    v_pi = Value(c).apply({"params": frozen["value"]}, obs, goals)
    weights = jnp.minimum(jnp.exp(c.temperature * (q_pi - v_pi)), 100.0)
    mean = actor_mean(params, obs, goals, c, actions.shape[-1])
    loss = -jnp.mean(weights * gaussian_log_prob(mean, c.actor_std, actions))
    return loss, {"actor/loss": loss, "actor/adv": (q_pi - v_pi).mean(), "actor/weight": weights.mean(),
                  "actor/mse": jnp.mean(jnp.square(mean - actions))}


def ddpgbc_actor_loss(params: Any, frozen: Any, batch: Batch, c: Config) -> tuple[jax.Array, dict]:
    """DDPG+BC as OGBench's GCIQL: -mean(q) / stop_grad(mean |q|) - alpha * mean(log pi(a)), with q the
    smaller head of the frozen critic at the clipped policy mean."""
    obs, actions, goals = batch["observations"], batch["actions"], batch["actor_goals"]
    mean = actor_mean(params, obs, goals, c, actions.shape[-1])
    q = jnp.min(Critic(c).apply({"params": frozen["critic"]}, obs, goals, jnp.clip(mean, -1.0, 1.0)), 0)
    q_loss = -jnp.mean(q) / jax.lax.stop_gradient(jnp.mean(jnp.abs(q)) + 1e-6)
    bc_loss = -c.alpha * jnp.mean(gaussian_log_prob(mean, c.actor_std, actions))
    loss = q_loss + bc_loss
    return loss, {"actor/loss": loss, "actor/q_loss": q_loss, "actor/bc_loss": bc_loss, "actor/q": q.mean(),
                  "actor/mse": jnp.mean(jnp.square(mean - actions))}


ACTOR_LOSSES = {"awr": awr_actor_loss, "ddpgbc": ddpgbc_actor_loss}  # Config.actor_loss -> its loss


def _optimizer(config: Config) -> optax.GradientTransformation:
    return optax.adam(config.lr)


class Agent(flax.struct.PyTreeNode):
    """Immutable GCIQL agent: parameters, target critic, optimizer state, RNG, step, static config."""

    params: Any
    target_critic: Any
    opt_state: Any
    rng: jax.Array
    step: jax.Array
    config: Config = flax.struct.field(pytree_node=False)
    action_dim: int = flax.struct.field(pytree_node=False)

    @classmethod
    def create(cls, seed: int, example_batch: dict[str, Any], config: Config) -> Agent:
        """Initialise parameters from the shapes of `example_batch`."""
        rng, k_value, k_critic, k_actor = jax.random.split(jax.random.PRNGKey(seed), 4)
        obs = jnp.asarray(example_batch["observations"][:1])
        actions = jnp.asarray(example_batch["actions"][:1])
        action_dim = actions.shape[-1]
        params = {
            "value": Value(config).init(k_value, obs, obs)["params"],
            "critic": Critic(config).init(k_critic, obs, obs, actions)["params"],
            "actor": Actor(config, action_dim).init(k_actor, obs, obs)["params"],
        }
        # A copy, not the same buffers: the train step donates the agent's arrays.
        target = jax.tree_util.tree_map(jnp.copy, params["critic"])
        return cls(params=params, target_critic=target,
                   opt_state=_optimizer(config).init(params), rng=rng,
                   step=jnp.zeros((), jnp.int32), config=config, action_dim=action_dim)

    def _update(self, batch: Batch) -> tuple[Agent, dict]:
        grads, info = jax.grad(losses, has_aux=True)(self.params, self.target_critic, batch,
                                                     self.config)
        updates, opt_state = _optimizer(self.config).update(grads, self.opt_state, self.params)
        params = optax.apply_updates(self.params, updates)
        target = optax.incremental_update(params["critic"], self.target_critic, self.config.tau)
        info["grad/norm"] = optax.tree.norm(grads)
        agent = self.replace(params=params, target_critic=target, opt_state=opt_state,
                             step=self.step + 1)
        return agent, info

    @jax.jit
    def update(self, batch: Batch) -> tuple[Agent, dict]:
        """One Adam step on value, critic and actor, then the target update."""
        return self._update(batch)

    @jax.jit
    def update_many(self, batches: Batch) -> tuple[Agent, dict]:
        """Several updates in one dispatch over a leading axis of batches (lax.scan)."""
        return scan_updates(self, batches)

    @jax.jit
    def sample_actions(self, observations: jax.Array, goals: jax.Array, seed: jax.Array,
                       temperature: float = 0.0) -> jax.Array:
        """Actions in [-1, 1]: the clipped mean at temperature 0, else mean + temperature * std * noise."""
        mean = actor_mean(self.params, observations, goals, self.config, self.action_dim)
        return sample_gaussian(mean, self.config.actor_std, seed, temperature)


# ----------------------------------------------------------------------------- data and inference


def make_sampler(dataset: Dataset, config: Config) -> RelabelSampler:
    """The batch sampler GCIQL trains on (`data.relabel`)."""
    return RelabelSampler(dataset, RelabelConfig(True, config.gamma, config.p_current_goal, config.p_trajectory_goal,
                                           config.p_random_goal, config.actor_p_random_goal))


def inference_fns(config: Config, action_dim: int, clip: bool = True
                  ) -> tuple[Callable[[Any, jax.Array], jax.Array], Callable[..., tuple[jax.Array, jax.Array]]]:
    """`encode_goals(params, goals) -> codes` and `act(params, observations, codes) -> (normalized actions,
    NaN)`, the actions clipped to [-1, 1] (with `clip=False`, the raw mean). GCIQL fuses the goal with the
    observation before its first layer, so a goal's codes are the goal itself."""

    def act(params: Any, observations: jax.Array, goals: jax.Array) -> tuple[jax.Array, jax.Array]:
        mean = actor_mean(params, observations, goals, config, action_dim)
        return (jnp.clip(mean, -1.0, 1.0) if clip else mean), jnp.full(observations.shape[:1], jnp.nan, jnp.float32)

    return (lambda params, goals: goals), act


def get_config(name: str) -> Config:
    """A named preset: 'ogbench_state', 'ogbench_pixel', 'bridge', 'sim' or 'tiny'."""
    presets = {
        "ogbench_state": Config(name="ogbench_state"),
        "ogbench_pixel": Config(name="ogbench_pixel", encoder="impala_small"),
        # BridgeData V2: gamma 0.98, expectile 0.7, AWR temperature 1, target update 0.002,
        # ResNet-34 with early fusion, MLPs 256^3.
        "bridge": Config(name="bridge", batch_size=128, value_hidden_dims=(256, 256, 256),
                              actor_hidden_dims=(256, 256, 256), gamma=0.98, expectile=0.7,
                              temperature=1.0, tau=0.002, encoder="resnet34"),
        # The twin's demo baseline: same encoder and widths as MQE's 'sim' preset, Bridge's IQL settings.
        "sim": Config(name="sim", value_hidden_dims=(256, 256, 256),
                           actor_hidden_dims=(256, 256, 256), gamma=0.98, expectile=0.7,
                           temperature=1.0, tau=0.002, encoder="impala_small_bf16"),
        "tiny": Config(name="tiny", batch_size=64, value_hidden_dims=(64, 64),
                            actor_hidden_dims=(64, 64), gamma=0.95),
    }
    if name not in presets:
        raise ValueError(f"unknown GCIQL preset '{name}'; choose one of {sorted(presets)}")
    return presets[name]
