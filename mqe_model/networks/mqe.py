"""MQE's networks: the critic's phi(s, a) and psi(g) ensembles and the goal-conditioned actor.

Both take an optional image encoder by name (`encoders.make_encoder`); the actor and the critic have
their own encoders of one architecture, never shared.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from mqe_model.networks.encoders import make_encoder
from mqe_model.networks.mlp import MLP, GaussianActorHead, ensemble


class Critic(nn.Module):
    """phi(s, a) and psi(g), each an ensemble of MLPs over a shared (optional) image encoder."""

    encoder_name: str | None  # image encoder, or None for states
    hidden_dims: Sequence[int]  # phi and psi MLP widths
    latent_dim: int  # size of phi(s, a) and psi(g)
    num_heads: int  # ensemble heads
    layer_norm: bool = True  # LayerNorm after each hidden GELU

    def setup(self) -> None:
        self.encoder = make_encoder(self.encoder_name)
        head = ensemble(MLP, self.num_heads)
        self.phi_net = head(self.hidden_dims, self.latent_dim, self.layer_norm)
        self.psi_net = head(self.hidden_dims, self.latent_dim, self.layer_norm)

    def features(self, x: jax.Array) -> jax.Array:
        """The shared encoder's output (the input itself for states)."""
        return x if self.encoder is None else self.encoder(x)

    def phi_of_features(self, features: jax.Array, actions: jax.Array) -> jax.Array:
        """phi from already encoded observations, (heads, B, latent)."""
        return self.phi_net(jnp.concatenate([features, actions], axis=-1))

    def psi_of_features(self, features: jax.Array) -> jax.Array:
        """psi from already encoded goals, (heads, B, latent)."""
        return self.psi_net(features)

    def phi(self, observations: jax.Array, actions: jax.Array) -> jax.Array:
        """State-action representation, (heads, B, latent)."""
        return self.phi_of_features(self.features(observations), actions)

    def psi(self, goals: jax.Array) -> jax.Array:
        """State/goal representation, (heads, B, latent)."""
        return self.psi_of_features(self.features(goals))

    def __call__(self, observations: jax.Array, actions: jax.Array) -> tuple[jax.Array, jax.Array]:
        return self.phi(observations, actions), self.psi(observations)


class Actor(nn.Module):
    """Goal-conditioned Gaussian policy mean; its own encoder applied to state and goal."""

    encoder_name: str | None  # image encoder, or None for states
    hidden_dims: Sequence[int]  # policy MLP widths
    action_dim: int  # dimension of the action

    @nn.compact
    def __call__(self, observations: jax.Array, goals: jax.Array, goals_encoded: bool = False,
                 observations_encoded: bool = False) -> jax.Array:
        """The mean; with `goals_encoded`, `goals` are already `encode_actor_goals` features, and with
        `observations_encoded` (which needs `goals_encoded`) the observations are too."""
        if observations_encoded and not goals_encoded:
            raise ValueError("observations_encoded needs goals_encoded: encode both or neither")
        encoder = make_encoder(self.encoder_name)
        if encoder is not None and not observations_encoded:
            if goals_encoded:
                observations = encoder(observations)
            else:  # one encoder call over both: half the kernel launches
                encoded = encoder(jnp.concatenate([observations, goals], axis=0))
                observations, goals = jnp.split(encoded, 2, axis=0)
        features = jnp.concatenate([observations, goals], axis=-1)
        return GaussianActorHead(self.hidden_dims, self.action_dim)(features)


def actor_encoder_key(encoder: nn.Module) -> str:
    """Where the actor's encoder weights sit in its params: the Actor builds its encoder inline
    (nn.compact), so they are under flax's automatic name."""
    return f"{type(encoder).__name__}_0"


def encode_actor_goals(actor_params: Any, goals: jax.Array, encoder_name: str | None) -> jax.Array:
    """The actor encoder's features of `goals` (the goals themselves without an encoder).

    A served goal is encoded once and reused every step (`Actor(..., goals_encoded=True)`).
    """
    encoder = make_encoder(encoder_name)
    if encoder is None:
        return goals
    return encoder.apply({"params": actor_params[actor_encoder_key(encoder)]}, goals)
