"""Serving layouts of a policy with two image encoders of one architecture (MQE's actor and critic).

The actor's and the critic's encoders see the same image at every served step. Taken out of their
trees and merged, they run as one network, each layer one kernel instead of two (half the launches
of a served step): stacked on a leading axis of 2 (run with `jax.vmap`: grouped convolutions), or
as one ResNet of twice the width (`encoders.twin_params`: block-diagonal filters, ordinary
convolutions, twice their FLOPs). On a CPU the separate encoders are the faster (docs/performance.md).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from mqe_model.networks.encoders import make_encoder, twin_encoder, twin_params
from mqe_model.networks.mqe import actor_encoder_key

ENCODER_ARRANGEMENTS = ("separate", "stacked", "twin")  # how a server runs the two encoders
STACKED_ENCODERS = "stacked_encoders"  # serving params: the actor's and the critic's encoder, stacked
TWIN_ENCODER = "twin_encoder"  # serving params: both encoders as one ResNet of twice the width


def encoder_arrangements(encoder_name: str | None) -> tuple[str, ...]:
    """The arrangements that apply to a two-encoder policy: 'separate' always; 'stacked' with an image
    encoder; 'twin' where that encoder is a ResNet."""
    if encoder_name is None:
        return ("separate",)
    try:
        twin_encoder(make_encoder(encoder_name))
    except ValueError:
        return ("separate", "stacked")
    return ENCODER_ARRANGEMENTS


def stack_encoders(params: Any, encoder_name: str | None, twin: bool = False) -> dict[str, Any]:
    """The serving layout of `{"actor", "critic"}` params: both encoders moved out of their trees
    under `STACKED_ENCODERS`, or with `twin` merged into one ResNet under `TWIN_ENCODER`."""
    encoder = make_encoder(encoder_name)
    if encoder is None:
        raise ValueError("stack_encoders: this policy has no image encoder to stack")
    if twin:
        twin_encoder(encoder)  # refuses an encoder without a twin before any work
    actor, critic = dict(params["actor"]), dict(params["critic"])
    pair = actor.pop(actor_encoder_key(encoder)), critic.pop("encoder")
    if twin:
        return {"actor": actor, "critic": critic, TWIN_ENCODER: twin_params(*pair)}
    stacked = jax.tree_util.tree_map(lambda a, c: jnp.stack([a, c]), *pair)
    return {"actor": actor, "critic": critic, STACKED_ENCODERS: stacked}


def encode_stacked(params: Any, images: jax.Array, encoder_name: str | None) -> tuple[jax.Array, jax.Array]:
    """The actor encoder's and the critic encoder's features of `images`, from `stack_encoders` params
    (either arrangement)."""
    encoder = make_encoder(encoder_name)
    if TWIN_ENCODER in params:
        features = twin_encoder(encoder).apply({"params": params[TWIN_ENCODER]}, images)
        return jnp.split(features, 2, axis=-1)
    features = jax.vmap(lambda p: encoder.apply({"params": p}, images))(params[STACKED_ENCODERS])
    return features[0], features[1]
