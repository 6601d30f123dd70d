"""MLPs, ensembles over heads, and the goal-conditioned Gaussian actor."""

from __future__ import annotations

import math
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


def default_init(scale: float = 1.0) -> nn.initializers.Initializer:
    """Variance-scaling init (fan-average, uniform), as in OGBench."""
    return nn.initializers.variance_scaling(scale, "fan_avg", "uniform")


class MLP(nn.Module):
    """Dense -> GELU -> LayerNorm hidden layers, then a linear output layer."""

    hidden_dims: Sequence[int]  # widths of the hidden layers
    output_dim: int  # width of the output layer
    layer_norm: bool = True  # LayerNorm after each hidden activation
    activate_final: bool = False  # also apply GELU (and LayerNorm) after the output layer

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        dims = [*self.hidden_dims, self.output_dim]
        for i, width in enumerate(dims):
            x = nn.Dense(width, kernel_init=default_init())(x)
            if i < len(dims) - 1 or self.activate_final:
                x = nn.gelu(x)
                if self.layer_norm:
                    x = nn.LayerNorm()(x)
        return x


def ensemble(module_cls: type[nn.Module], num_heads: int) -> type[nn.Module]:
    """`module_cls` replicated `num_heads` times with independent parameters; outputs stacked on axis 0."""
    return nn.vmap(
        module_cls,
        variable_axes={"params": 0},
        split_rngs={"params": True},
        in_axes=None,
        out_axes=0,
        axis_size=num_heads,
    )


class GaussianActorHead(nn.Module):
    """Maps features to the mean of a Gaussian policy with a constant standard deviation."""

    hidden_dims: Sequence[int]  # widths of the hidden layers
    action_dim: int  # dimension of the action
    layer_norm: bool = True  # LayerNorm in the hidden layers

    @nn.compact
    def __call__(self, features: jax.Array) -> jax.Array:
        h = MLP(self.hidden_dims[:-1], self.hidden_dims[-1], self.layer_norm, activate_final=True)(
            features
        )
        return nn.Dense(self.action_dim, kernel_init=default_init(0.01))(h)


def gaussian_log_prob(mean: jax.Array, std: float, actions: jax.Array) -> jax.Array:
    """Log density of `actions` under a diagonal Gaussian N(mean, std^2), summed over the last axis."""
    z = (actions - mean) / std
    return -0.5 * jnp.sum(jnp.square(z), axis=-1) - mean.shape[-1] * (
        math.log(std) + 0.5 * math.log(2.0 * math.pi)
    )


def sample_gaussian(mean: jax.Array, std: float, seed: jax.Array, temperature: float) -> jax.Array:
    """Actions in [-1, 1]: the clipped mean at temperature 0, else mean + temperature * std * noise."""
    noise = jax.random.normal(seed, mean.shape) * std * temperature
    return jnp.clip(mean + noise, -1.0, 1.0)
