"""Goal-conditioned behaviour cloning (GCBC): the whole agent in one file.

A Gaussian policy with constant standard deviation (OGBench's GCBC default), trained by maximum
likelihood on the data's actions towards goals drawn uniformly from the same trajectory's future.
With an image encoder the observation and the goal are stacked channel-wise before it (early
fusion, as BridgeData V2's GCBC); with states they are concatenated.
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
from mqe_model.networks.mlp import GaussianActorHead, gaussian_log_prob, sample_gaussian

Batch = dict[str, jax.Array]
HAS_DISTANCE = False  # the act answers NaN for the distance: no quasimetric critic
REMOVED_FIELDS: dict[str, Any] = {}  # config fields older checkpoints may carry (see mqe.REMOVED_FIELDS)


@dataclasses.dataclass(frozen=True)
class Config:
    """Hyperparameters of GCBC; presets come from `get_config(name)`."""

    name: str = "ogbench_state"  # preset this config came from
    lr: float = 3e-4  # Adam learning rate
    batch_size: int = 256  # samples per update
    actor_hidden_dims: Sequence[int] = (512, 512, 512)  # policy MLP widths
    layer_norm: bool = True  # LayerNorm after each hidden GELU (OGBench's GCBC has none)
    actor_std: float = 1.0  # constant standard deviation of the Gaussian policy
    actor_p_random_goal: float = 0.0  # chance an actor goal is a random state, not a future one (OGBench stitch: 0.5)
    encoder: str | None = None  # image encoder (early fusion of observation and goal) or None for states

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.lr <= 0 or self.actor_std <= 0:
            raise ValueError("need batch_size >= 1, lr > 0 and actor_std > 0")
        check_probability("actor_p_random_goal", self.actor_p_random_goal)


class Actor(nn.Module):
    """Policy mean from (observation, goal), fused early."""

    config: Config
    action_dim: int

    @nn.compact
    def __call__(self, observations: jax.Array, goals: jax.Array) -> jax.Array:
        c = self.config
        encoder = make_encoder(c.encoder)
        if encoder is None:
            features = jnp.concatenate([observations, goals], axis=-1)
        else:
            features = encoder(jnp.concatenate([observations, goals], axis=-1))
        return GaussianActorHead(c.actor_hidden_dims, self.action_dim, c.layer_norm)(features)


def actor_mean(params: Any, observations: jax.Array, goals: jax.Array, config: Config,
               action_dim: int) -> jax.Array:
    """The policy mean (unclipped, normalized action units) for inference."""
    return Actor(config, action_dim).apply({"params": params["actor"]}, observations, goals)


def actor_loss(params: Any, batch: Batch, config: Config) -> tuple[jax.Array, dict]:
    """-mean log pi(a | s, g); metrics under `actor/`."""
    mean = actor_mean(params, batch["observations"], batch["actor_goals"], config,
                      batch["actions"].shape[-1])
    log_prob = gaussian_log_prob(mean, config.actor_std, batch["actions"])
    loss = -jnp.mean(log_prob)
    return loss, {
        "actor/loss": loss,
        "actor/log_prob": log_prob.mean(),
        "actor/mse": jnp.mean(jnp.square(mean - batch["actions"])),
    }


def _optimizer(config: Config) -> optax.GradientTransformation:
    return optax.adam(config.lr)


class Agent(flax.struct.PyTreeNode):
    """Immutable GCBC agent: parameters, optimizer state, RNG, step and a static config."""

    params: Any
    opt_state: Any
    rng: jax.Array
    step: jax.Array
    config: Config = flax.struct.field(pytree_node=False)
    action_dim: int = flax.struct.field(pytree_node=False)

    @classmethod
    def create(cls, seed: int, example_batch: dict[str, Any], config: Config) -> Agent:
        """Initialise parameters from the shapes of `example_batch`."""
        rng, key = jax.random.split(jax.random.PRNGKey(seed))
        obs = jnp.asarray(example_batch["observations"][:1])
        action_dim = example_batch["actions"].shape[-1]
        params = {"actor": Actor(config, action_dim).init(key, obs, obs)["params"]}
        return cls(params=params, opt_state=_optimizer(config).init(params), rng=rng,
                   step=jnp.zeros((), jnp.int32), config=config, action_dim=action_dim)

    def _update(self, batch: Batch) -> tuple[Agent, dict]:
        grads, info = jax.grad(actor_loss, has_aux=True)(self.params, batch, self.config)
        updates, opt_state = _optimizer(self.config).update(grads, self.opt_state, self.params)
        info["grad/norm"] = optax.tree.norm(grads)
        params = optax.apply_updates(self.params, updates)
        return self.replace(params=params, opt_state=opt_state, step=self.step + 1), info

    @jax.jit
    def update(self, batch: Batch) -> tuple[Agent, dict]:
        """One Adam step."""
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
    """The batch sampler GCBC trains on (`data.relabel`)."""
    return RelabelSampler(dataset, RelabelConfig(False, p_random_actor_goal=config.actor_p_random_goal))


def inference_fns(config: Config, action_dim: int, clip: bool = True
                  ) -> tuple[Callable[[Any, jax.Array], jax.Array], Callable[..., tuple[jax.Array, jax.Array]]]:
    """`encode_goals(params, goals) -> codes` and `act(params, observations, codes) -> (normalized actions,
    NaN)`, the actions clipped to [-1, 1] (with `clip=False`, the raw mean). GCBC fuses the goal with the
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
        # BridgeData V2: ResNet-34 (GroupNorm) on observation and goal stacked channel-wise, MLP 256^3.
        "bridge": Config(name="bridge", batch_size=128, actor_hidden_dims=(256, 256, 256),
                             encoder="resnet34"),
        # The twin's demo baseline: same encoder and widths as MQE's 'sim' preset.
        "sim": Config(name="sim", actor_hidden_dims=(256, 256, 256), encoder="impala_small_bf16"),
        "tiny": Config(name="tiny", batch_size=64, actor_hidden_dims=(64, 64)),
    }
    if name not in presets:
        raise ValueError(f"unknown GCBC preset '{name}'; choose one of {sorted(presets)}")
    return presets[name]
