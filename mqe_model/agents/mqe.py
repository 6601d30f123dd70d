"""Multistep Quasimetric Estimation (MQE): the whole agent in one file.

Critic: phi(s, a) and psi(g) map into R^{N*M}; d((s, a), g) = MRN(phi(s, a), psi(g)), two ensemble
heads. It is trained with the multistep LINEX backup over the whole B x B batch (state-action i,
goal j) towards the waypoint distance discounted by gamma^{k'}, plus the action-invariance loss
that pulls psi(s) onto phi(s, a) for the dataset's own actions.
Actor: a goal-conditioned Gaussian with constant std, trained with DDPG+BC against
q = -min_heads d(phi(s, pi(s, g)), psi(g)) (or the farthest head, `actor_heads`), normalised by the
batch's mean |q|.
One Adam step on critic + actor per update; no target networks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from mqe_model.agents import scan_updates
from mqe_model.data.sampling import check_probability
from mqe_model.networks.encoders import make_encoder, twin_encoder, twin_params
from mqe_model.networks.mlp import (
    MLP,
    GaussianActorHead,
    ensemble,
    gaussian_log_prob,
    sample_gaussian,
)
from mqe_model.quasimetric import (
    mrn_distance,
    mrn_pairwise,
    mrn_pairwise_naive,
    mrn_pairwise_pallas,
)

Batch = dict[str, jax.Array]


ACTOR_HEADS = ("nearest", "farthest")  # MQEConfig.actor_heads
INVARIANCE_FORMS = ("exp", "squared")  # MQEConfig.invariance_form
INVARIANCE_MOVES = ("both", "phi")  # MQEConfig.invariance_moves
ACTOR_GOAL_PAIRS = ("own", "all", "sampled", "distances")  # MQEConfig.actor_goal_pairs


@dataclasses.dataclass(frozen=True)
class MQEConfig:
    """Hyperparameters of the MQE agent; presets come from `get_config(name)`."""

    name: str = "ogbench_state"  # preset this config came from
    lr: float = 3e-4  # Adam learning rate for critic and actor
    flat_optimizer: bool = False  # Adam on all parameters raveled into one vector (optax.flatten): the same steps in fewer, larger kernels
    batch_size: int = 256  # samples per update; the backup uses all B x B pairs
    latent_dim: int = 512  # size of phi(s, a) and psi(g), split into MRN components
    critic_hidden_dims: Sequence[int] = (512, 512, 512)  # phi and psi MLP widths
    actor_hidden_dims: Sequence[int] = (512, 512, 512)  # policy MLP widths
    layer_norm: bool = True  # LayerNorm after each hidden GELU of the critic
    actor_layer_norm: bool = True  # LayerNorm in the policy MLP too (OGBench's actors have none)
    num_components: int = 8  # MRN components N
    num_heads: int = 2  # critic ensemble heads; q takes the minimum distance over them
    gamma: float = 0.995  # discount: goals are Geom(1 - gamma) steps ahead; d is in units of -log(gamma) per step
    lam: float = 0.95  # waypoint discount lambda: waypoints are Geom(1 - lambda) steps ahead
    p_next: float = 0.2  # probability that the waypoint is the next state (k' = 1)
    max_waypoint_offset: int = 0  # cap on the waypoint offset k', in steps; 0: capped at the goal's offset only (DESIGN.md)
    max_goal_offset: int = 0  # cap on the critic goal's offset K, in steps (as a short trajectory's end caps it); 0: the trajectory end only (DESIGN.md)
    alpha: float = 1.0  # behaviour-cloning weight of the actor loss
    actor_p_random_goal: float = 0.0  # chance an actor goal is a random state, not a future one (OGBench stitch: 0.5)
    actor_bc_on_random_goals: bool = True  # BC on random actor goals too (OGBench); False: own-trajectory goals only (the paper's L_mu)
    actor_heads: str = "nearest"  # head whose distance the actor's q uses: 'nearest' (DESIGN.md) or 'farthest'
    actor_goal_pairs: str = "own"  # q-term pairs: 'own' (state i, goal i; DESIGN.md), 'all' (pi(s_i, g_j) for every i, j: the paper's L_mu), 'sampled' (K goals per state) or 'distances' (pi(s_i, g_i) against every g_j)
    actor_goal_samples: int = 16  # goals per state with 'sampled': its own and the next K - 1 rows', weighted so that the mean is unbiased for 'all' (K/B of its cost)
    zeta: float = 1.0  # weight of the action-invariance loss
    invariance_form: str = "exp"  # L_I per term: 'exp' (exp(-d) - 1)^2 (the paper, DESIGN.md) or 'squared' d^2 (the public mqe-release code)
    invariance_moves: str = "both"  # what L_I's gradient moves: 'both' psi(s) and phi(s, a) (the paper), or 'phi' alone (psi(s) held, so L_I cannot pull the states' psi together; ogbench.md section 36)
    invariance_actions: int = 1  # actions per state in L_I: 1 = its own (DESIGN.md); n = own + the next n - 1 samples' (batch_size: the paper's all pairs)
    linex_clip: float = 5.0  # above this delta the LINEX backup uses its linear branch
    diag_weight: float = 0.5  # weight of the positive (diagonal) pairs in the backup mean
    actor_std: float = 1.0  # constant standard deviation of the Gaussian policy
    encoder: str | None = None  # image encoder ('impala_small', 'resnet34', ...) or None for states
    pairwise: str = "fused"  # all-pairs MRN: 'fused' (memory-lean), 'pallas' (fused, its max tiled; GPU) or 'naive'
    matmul_precision: str = "float32"  # network matmuls: 'float32', 'tensorfloat32' or 'bfloat16' (operands rounded, f32 accumulate)

    def __post_init__(self) -> None:
        if self.latent_dim % (2 * self.num_components):
            raise ValueError(
                f"latent_dim {self.latent_dim} must be divisible by 2 * num_components "
                f"({2 * self.num_components}); change one of them"
            )
        if not (0 < self.gamma < 1 and 0 < self.lam < 1 and 0 <= self.p_next <= 1):
            raise ValueError("need 0 < gamma < 1, 0 < lam < 1 and 0 <= p_next <= 1")
        for name in ("max_waypoint_offset", "max_goal_offset"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)}: a number of steps >= 1, or 0 for no cap")
        if self.pairwise not in ("fused", "naive", "pallas"):
            raise ValueError(f"pairwise must be 'fused', 'pallas' or 'naive', got {self.pairwise!r}")
        if self.matmul_precision not in ("float32", "tensorfloat32", "bfloat16"):
            raise ValueError(
                f"matmul_precision must be 'float32', 'tensorfloat32' or 'bfloat16', "
                f"got {self.matmul_precision!r}"
            )
        if self.batch_size < 2:
            raise ValueError("batch_size must be >= 2: the backup contrasts pairs within a batch")
        check_probability("actor_p_random_goal", self.actor_p_random_goal)
        if not self.actor_bc_on_random_goals and not 0 < self.actor_p_random_goal < 1:
            raise ValueError(f"actor_bc_on_random_goals=False keeps BC off the random actor goals: it needs "
                             f"0 < actor_p_random_goal < 1, got {self.actor_p_random_goal}")
        if self.actor_heads not in ACTOR_HEADS:
            raise ValueError(f"actor_heads={self.actor_heads!r}: choose one of {', '.join(ACTOR_HEADS)}")
        if self.actor_goal_pairs not in ACTOR_GOAL_PAIRS:
            raise ValueError(f"actor_goal_pairs={self.actor_goal_pairs!r}: choose one of {', '.join(ACTOR_GOAL_PAIRS)}")
        if self.actor_goal_pairs == "sampled" and not 2 <= self.actor_goal_samples <= self.batch_size:
            raise ValueError(f"actor_goal_samples={self.actor_goal_samples}: must be within 2..batch_size "
                             f"({self.batch_size}) with actor_goal_pairs='sampled'; batch_size is 'all'")
        if self.invariance_form not in INVARIANCE_FORMS:
            raise ValueError(f"invariance_form={self.invariance_form!r}: choose one of {', '.join(INVARIANCE_FORMS)}")
        if self.invariance_moves not in INVARIANCE_MOVES:
            raise ValueError(f"invariance_moves={self.invariance_moves!r}: choose one of {', '.join(INVARIANCE_MOVES)}")
        if not 1 <= self.invariance_actions <= self.batch_size:
            raise ValueError(f"invariance_actions={self.invariance_actions}: must be within 1..batch_size "
                             f"({self.batch_size}); 1 is each state's own action, batch_size every action of the batch")
        if self.actor_goal_pairs in ("all", "sampled") and self.encoder is not None:
            raise ValueError(f"actor_goal_pairs={self.actor_goal_pairs!r} runs the actor on K x B (state, goal) "
                             f"pairs: state-based presets only, not with encoder {self.encoder!r}")

    @property
    def goals_per_state(self) -> int:
        """Actor passes per state: 1 ('own', 'distances'), batch_size ('all') or actor_goal_samples ('sampled')."""
        return {"all": self.batch_size, "sampled": self.actor_goal_samples}.get(self.actor_goal_pairs, 1)

    @property
    def step_scale(self) -> float:
        """Distance per environment step at the backup's fixed point: -log(gamma)."""
        return -math.log(self.gamma)


# ----------------------------------------------------------------------------- networks


class Critic(nn.Module):
    """phi(s, a) and psi(g), each an ensemble of MLPs over a shared (optional) image encoder."""

    config: MQEConfig

    def setup(self) -> None:
        c = self.config
        self.encoder = make_encoder(c.encoder)
        head = ensemble(MLP, c.num_heads)
        self.phi_net = head(c.critic_hidden_dims, c.latent_dim, c.layer_norm)
        self.psi_net = head(c.critic_hidden_dims, c.latent_dim, c.layer_norm)

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

    config: MQEConfig
    action_dim: int

    @nn.compact
    def __call__(self, observations: jax.Array, goals: jax.Array, goals_encoded: bool = False,
                 observations_encoded: bool = False) -> jax.Array:
        """The mean; with `goals_encoded`, `goals` are already `encode_actor_goals` features, and with
        `observations_encoded` (which needs `goals_encoded`) the observations are too."""
        c = self.config
        if observations_encoded and not goals_encoded:
            raise ValueError("observations_encoded needs goals_encoded: encode both or neither")
        encoder = make_encoder(c.encoder)
        if encoder is not None and not observations_encoded:
            if goals_encoded:
                observations = encoder(observations)
            else:  # one encoder call over both: half the kernel launches
                encoded = encoder(jnp.concatenate([observations, goals], axis=0))
                observations, goals = jnp.split(encoded, 2, axis=0)
        features = jnp.concatenate([observations, goals], axis=-1)
        return GaussianActorHead(c.actor_hidden_dims, self.action_dim, c.actor_layer_norm)(features)


def _actor_encoder_key(encoder: nn.Module) -> str:
    # The Actor builds its encoder inline (nn.compact), so its weights sit under flax's auto name.
    return f"{type(encoder).__name__}_0"


def encode_actor_goals(actor_params: Any, goals: jax.Array, config: MQEConfig) -> jax.Array:
    """The actor encoder's features of `goals` (the goals themselves without an encoder).

    A served goal is encoded once and reused every step (`Actor(..., goals_encoded=True)`).
    """
    encoder = make_encoder(config.encoder)
    if encoder is None:
        return goals
    return encoder.apply({"params": actor_params[_actor_encoder_key(encoder)]}, goals)


STACKED_ENCODERS = "stacked_encoders"  # serving params: the actor's and the critic's encoder, stacked
TWIN_ENCODER = "twin_encoder"  # serving params: both encoders as one ResNet of twice the width


def stack_encoders(params: Any, config: MQEConfig, twin: bool = False) -> dict[str, Any]:
    """Serving layout of image MQE params: the actor's and the critic's encoders (same architecture,
    their own weights) taken out of the actor and critic trees and merged, so that `encode_stacked`
    runs both as one network and each layer is one kernel instead of two (half the launches of a
    served step). Stacked on a leading axis of 2 under `STACKED_ENCODERS` (run with `jax.vmap`: grouped
    convolutions), or with `twin` as one ResNet of twice the width under `TWIN_ENCODER`
    (`encoders.twin_params`: block-diagonal filters, ordinary convolutions, twice their FLOPs)."""
    encoder = make_encoder(config.encoder)
    if encoder is None:
        raise ValueError("stack_encoders: this MQE config has no image encoder to stack")
    if twin:
        twin_encoder(encoder)  # refuses an encoder without a twin before any work
    actor, critic = dict(params["actor"]), dict(params["critic"])
    pair = actor.pop(_actor_encoder_key(encoder)), critic.pop("encoder")
    if twin:
        return {"actor": actor, "critic": critic, TWIN_ENCODER: twin_params(*pair)}
    stacked = jax.tree_util.tree_map(lambda a, c: jnp.stack([a, c]), *pair)
    return {"actor": actor, "critic": critic, STACKED_ENCODERS: stacked}


def encode_stacked(params: Any, images: jax.Array, config: MQEConfig) -> tuple[jax.Array, jax.Array]:
    """The actor encoder's and the critic encoder's features of `images`, from `stack_encoders` params
    (either arrangement)."""
    encoder = make_encoder(config.encoder)
    if TWIN_ENCODER in params:
        features = twin_encoder(encoder).apply({"params": params[TWIN_ENCODER]}, images)
        return jnp.split(features, 2, axis=-1)
    features = jax.vmap(lambda p: encoder.apply({"params": p}, images))(params[STACKED_ENCODERS])
    return features[0], features[1]


# ----------------------------------------------------------------------------- losses


def backup_loss(
    dist: jax.Array,
    dist_w: jax.Array,
    k: jax.Array,
    gamma: float,
    clip: float = 5.0,
    diag_weight: float = 0.5,
) -> jax.Array:
    """Multistep LINEX backup over all pairs.

    dist, dist_w: (E, B, B) distances d((s_i, a_i), g_j) and d(s^w_i, g_j); k: (B,) waypoint offsets.
    Per pair, delta = dist - stop_grad(dist_w); loss gamma^{k_i} exp(delta) - dist, or delta where
    delta > clip. Returns (1 - diag_weight) * mean(all pairs) + diag_weight * mean(diagonal).
    """
    delta = dist - jax.lax.stop_gradient(dist_w)
    discount = jnp.power(gamma, k.astype(dist.dtype))[None, :, None]
    # exp of the clipped delta keeps the unused branch finite, so gradients stay finite too.
    linex = discount * jnp.exp(jnp.minimum(delta, clip)) - dist
    per_pair = jnp.where(delta > clip, delta, linex)
    diagonal = jnp.diagonal(per_pair, axis1=-2, axis2=-1)
    return (1.0 - diag_weight) * jnp.mean(per_pair) + diag_weight * jnp.mean(diagonal)


def invariance_loss(d: jax.Array, form: str = "exp") -> jax.Array:
    """Action invariance over d = d(psi(s), phi(s, a)): mean((exp(-d) - 1)^2), or with form 'squared'
    mean(d^2); the two agree to first order near d = 0, where the first saturates for large d."""
    if form == "squared":
        return jnp.mean(jnp.square(d))
    return jnp.mean(jnp.square(jnp.exp(-d) - 1.0))


PAIRWISE = {"fused": mrn_pairwise, "naive": mrn_pairwise_naive, "pallas": mrn_pairwise_pallas}


def _pairwise(config: MQEConfig):
    return PAIRWISE[config.pairwise]


class CriticForward(NamedTuple):
    """The critic's passes over a batch, computed once and shared by the critic and actor losses."""

    phi: jax.Array  # (E, B, latent) phi(s_i, a_i) for the data's actions
    psi_goals: jax.Array  # (E, B, latent) psi of the critic goals
    psi_waypoints: jax.Array  # (E, B, latent) psi of the waypoints
    psi_states: jax.Array  # (E, B, latent) psi of the states themselves (action invariance)
    state_features: jax.Array  # (B, F) the encoder's output for the states (F = obs dim for states)


def critic_forward(critic_params: Any, batch: Batch, config: MQEConfig) -> CriticForward:
    """One encoder call and one psi call over goals, waypoints and states together (larger matmuls,
    a third of the launches), then phi on the states already encoded: each image is encoded once."""
    critic = Critic(config)
    variables = {"params": critic_params}
    stacked = jnp.concatenate([batch["goals"], batch["waypoints"], batch["observations"]], axis=0)
    features = critic.apply(variables, stacked, method=Critic.features)
    psi_all = critic.apply(variables, features, method=Critic.psi_of_features)
    psi_g, psi_w, psi_s = jnp.split(psi_all, 3, axis=1)
    state_features = jnp.split(features, 3, axis=0)[2]
    phi = critic.apply(variables, state_features, batch["actions"], method=Critic.phi_of_features)
    return CriticForward(phi, psi_g, psi_w, psi_s, state_features)


def other_action_distances(critic_params: Any, forward: CriticForward, actions: jax.Array,
                           config: MQEConfig) -> jax.Array:
    """d(psi(s_i), phi(s_i, a_{i+k})) for k = 1 .. invariance_actions - 1 (batch indices cyclic),
    (E, (invariance_actions - 1) * B): state i with the actions of the samples after it. With
    invariance_actions = B this is every (state, other action) pair of the batch, as in the paper's L_I,
    which asks d(psi(s), phi(s, a)) = 0 for every action a, not only for the one the data took there."""
    shifts = range(1, config.invariance_actions)
    other_actions = jnp.concatenate([jnp.roll(actions, -k, axis=0) for k in shifts], axis=0)
    features = jnp.tile(forward.state_features, (len(shifts), 1))
    phi = Critic(config).apply({"params": critic_params}, features, other_actions, method=Critic.phi_of_features)
    return mrn_distance(jnp.tile(forward.psi_states, (1, len(shifts), 1)), phi, config.num_components)


def critic_loss(
    params: Any, batch: Batch, config: MQEConfig, forward: CriticForward | None = None
) -> tuple[jax.Array, dict]:
    """Backup + zeta * invariance; metrics under `critic/`. `forward`: the batch's `critic_forward`
    under `params` when the caller already has it (it is recomputed otherwise)."""
    if forward is None:
        forward = critic_forward(params["critic"], batch, config)
    phi, psi_g, psi_w, psi_s = forward.phi, forward.psi_goals, forward.psi_waypoints, forward.psi_states

    pairwise = _pairwise(config)
    dist = pairwise(phi, psi_g, num_components=config.num_components)
    dist_w = pairwise(psi_w, psi_g, num_components=config.num_components)
    backup = backup_loss(
        dist, dist_w, batch["waypoint_offsets"], config.gamma, config.linex_clip, config.diag_weight
    )
    if config.invariance_moves == "phi":
        forward = forward._replace(psi_states=jax.lax.stop_gradient(psi_s))
    d_inv = mrn_distance(forward.psi_states, phi, config.num_components)
    d_inv_all = d_inv
    if config.invariance_actions > 1:
        d_inv_others = other_action_distances(params["critic"], forward, batch["actions"], config)
        d_inv_all = jnp.concatenate([d_inv, d_inv_others], axis=-1)
    invariance = invariance_loss(d_inv_all, config.invariance_form)
    loss = backup + config.zeta * invariance
    positive = jnp.diagonal(dist, axis1=-2, axis2=-1)
    centre = jnp.mean(psi_g, axis=-2, keepdims=True)
    info = {
        "critic/loss": loss,
        "critic/backup": backup,
        "critic/invariance": invariance,
        "critic/dist_positive": positive.mean(),
        "critic/dist_all": dist.mean(),
        "critic/dist_invariance": d_inv.mean(),
        "critic/positive_steps": positive.mean() / config.step_scale,
        # psi(g)'s offset from the origin against its spread (squared norms): a large offset is what
        # costs an all-pairs distance about the origin its precision (quasimetric._mrn_pairwise)
        "critic/latent_centre_sq": jnp.mean(jnp.sum(jnp.square(centre), axis=-1)),
        "critic/latent_spread_sq": jnp.mean(jnp.sum(jnp.square(psi_g - centre), axis=-1)),
    }
    if config.invariance_actions > 1:
        info["critic/dist_invariance_others"] = d_inv_others.mean()
    return loss, info


def actor_distance(phi: jax.Array, psi: jax.Array, config: MQEConfig) -> jax.Array:
    """The distance whose negative is the actor's q: the MRN distance of the head `actor_heads` names,
    (heads, ..., latent) -> (...). 'farthest' is the min over heads of q, the pessimistic estimate
    that OGBench's double-Q agents use."""
    return reduce_heads(mrn_distance(phi, psi, config.num_components), config)


def reduce_heads(distances: jax.Array, config: MQEConfig) -> jax.Array:
    """The head `actor_heads` names, over the leading axis of heads."""
    return (jnp.min if config.actor_heads == "nearest" else jnp.max)(distances, axis=0)


def pair_weights(size: int, per_state: int) -> jax.Array:
    """Weights (summing to 1) of the K * B actor rows: the own pairs (the first B rows) 1/B in all, the
    K - 1 other goals of each state the rest, so the weighted mean over i.i.d. rows has the mean over
    all B x B pairs as its expectation."""
    others = (1.0 - 1.0 / size) / ((per_state - 1) * size)
    return jnp.concatenate([jnp.full(size, 1.0 / size**2), jnp.full((per_state - 1) * size, others)])


def actor_loss(
    params: Any, batch: Batch, config: MQEConfig, forward: CriticForward | None = None
) -> tuple[jax.Array, dict]:
    """DDPG+BC: -mean(q) / stop_grad(mean |q|) - alpha * mean(log pi(a | s, g)); metrics under `actor/`.

    q is taken on each state's own actor goal, or on K goals per state (`config.goals_per_state`):
    with `actor_goal_pairs='all'` every (state i, goal j) pair of the batch as in the paper's L_mu (B x B
    actor and phi passes), with 'sampled' state i with the goals of rows i, i + 1, ..., i + K - 1
    (mod B). Rows are i.i.d., so weighting the own pair 1/B and the others (1 - 1/B) / (K - 1) makes
    the expected q term that of 'all' at K/B of its cost (at K = B it is 'all'). With 'distances' the
    action is the own goal's, pi(s_i, g_i), and q is the mean of -d((s_i, pi(s_i, g_i)), g_j) over every
    goal j: the B x B distances the appendix names, without more actor passes. The BC term always
    uses the state's own goal and action; with `actor_bc_on_random_goals=False` it is the mean over the
    rows whose actor goal is a future state of their own trajectory (`batch["actor_goal_own"]`), as the
    paper's L_mu clones each action only towards its own trajectory's goal.

    The critic is frozen (stop-gradient on its parameters and on what `forward` carries), so this
    loss moves only the actor, whether or not `forward` is shared with `critic_loss`."""
    action_dim = batch["actions"].shape[-1]
    observations, goals = batch["observations"], batch["actor_goals"]
    frozen = {"params": jax.lax.stop_gradient(params["critic"])}
    critic = Critic(config)
    if forward is None:
        state_features = critic.apply(frozen, observations, method=Critic.features)
    else:  # the critic loss already encoded the states
        state_features = jax.lax.stop_gradient(forward.state_features)
    # Actor goals stay out of the critic's stacked pass: they need no backward pass (measured on an
    # H100: stacking them cost 3-7% of the state-based update).
    psi = critic.apply(frozen, goals, method=Critic.psi)
    size, per_state = observations.shape[0], config.goals_per_state
    own = slice(None, size)  # rows k * B + i pair state i with the goal of row (i + k) mod B
    row_weights = pair_weights(size, per_state) if per_state > 1 else None

    def pairs_mean(x: jax.Array) -> jax.Array:
        return jnp.mean(x) if row_weights is None else jnp.sum(row_weights * x)

    if per_state > 1:
        goal_rows = ((jnp.arange(size)[None, :] + jnp.arange(per_state)[:, None]) % size).reshape(-1)
        observations, state_features = (jnp.tile(x, (per_state, 1)) for x in (observations, state_features))
        goals, psi = goals[goal_rows], psi[:, goal_rows]
    mean = Actor(config, action_dim).apply({"params": params["actor"]}, observations, goals)
    policy_actions = jnp.clip(mean, -1.0, 1.0)
    phi = critic.apply(frozen, state_features, policy_actions, method=Critic.phi_of_features)
    if config.actor_goal_pairs == "distances":  # (B, B): state i's action, goal j
        q = -reduce_heads(_pairwise(config)(phi, psi, num_components=config.num_components), config)
    else:
        q = -actor_distance(phi, psi, config)
    # The 1e-6 only guards a batch whose q is exactly zero everywhere (never in practice).
    q_loss = -pairs_mean(q) / jax.lax.stop_gradient(pairs_mean(jnp.abs(q)) + 1e-6)
    log_prob = gaussian_log_prob(mean[own], config.actor_std, batch["actions"])
    if config.actor_bc_on_random_goals:
        bc_loss = -config.alpha * jnp.mean(log_prob)
    else:  # a batch of random goals only (rare) has no BC term
        own_goals = batch["actor_goal_own"]
        bc_loss = -config.alpha * jnp.sum(own_goals * log_prob) / jnp.maximum(jnp.sum(own_goals), 1.0)
    loss = q_loss + bc_loss
    info = {
        "actor/loss": loss,
        "actor/q_loss": q_loss,
        "actor/bc_loss": bc_loss,
        "actor/q": pairs_mean(q),
        "actor/log_prob": log_prob.mean(),
        "actor/mse": jnp.mean(jnp.square(mean[own] - batch["actions"])),
    }
    return loss, info


# ----------------------------------------------------------------------------- agent


def _optimizer(config: MQEConfig) -> optax.GradientTransformation:
    adam = optax.adam(config.lr)
    return optax.flatten(adam) if config.flat_optimizer else adam


class MQEAgent(flax.struct.PyTreeNode):
    """Immutable MQE agent: parameters, optimizer state, RNG, step and a static config."""

    params: Any
    opt_state: Any
    rng: jax.Array
    step: jax.Array
    config: MQEConfig = flax.struct.field(pytree_node=False)
    action_dim: int = flax.struct.field(pytree_node=False)

    @classmethod
    def create(cls, seed: int, example_batch: dict[str, Any], config: MQEConfig) -> MQEAgent:
        """Initialise parameters from the shapes of `example_batch`."""
        rng = jax.random.PRNGKey(seed)
        rng, critic_key, actor_key = jax.random.split(rng, 3)
        obs = jnp.asarray(example_batch["observations"][:1])
        actions = jnp.asarray(example_batch["actions"][:1])
        action_dim = actions.shape[-1]
        params = {
            "critic": Critic(config).init(critic_key, obs, actions)["params"],
            "actor": Actor(config, action_dim).init(actor_key, obs, obs)["params"],
        }
        return cls(
            params=params,
            opt_state=_optimizer(config).init(params),
            rng=rng,
            step=jnp.zeros((), jnp.int32),
            config=config,
            action_dim=action_dim,
        )

    def total_loss(self, params: Any, batch: Batch) -> tuple[jax.Array, dict]:
        """Critic loss + actor loss (the actor sees the critic through a stop-gradient)."""
        with jax.default_matmul_precision(self.config.matmul_precision):
            forward = critic_forward(params["critic"], batch, self.config)
            c_loss, c_info = critic_loss(params, batch, self.config, forward)
            a_loss, a_info = actor_loss(params, batch, self.config, forward)
        return c_loss + a_loss, {**c_info, **a_info}

    def _update(self, batch: Batch) -> tuple[MQEAgent, dict]:
        grads, info = jax.grad(self.total_loss, has_aux=True)(self.params, batch)
        updates, opt_state = _optimizer(self.config).update(grads, self.opt_state, self.params)
        params = optax.apply_updates(self.params, updates)
        info["grad/norm"] = optax.tree.norm(grads)
        return self.replace(params=params, opt_state=opt_state, step=self.step + 1), info

    @jax.jit
    def update(self, batch: Batch) -> tuple[MQEAgent, dict]:
        """One Adam step on critic + actor."""
        return self._update(batch)

    @jax.jit
    def update_many(self, batches: Batch) -> tuple[MQEAgent, dict]:
        """Several updates in one dispatch: `batches` has a leading axis of updates (lax.scan)."""
        return scan_updates(self, batches)

    @jax.jit
    def sample_actions(
        self, observations: jax.Array, goals: jax.Array, seed: jax.Array, temperature: float = 0.0
    ) -> jax.Array:
        """Actions in [-1, 1]: the clipped mean at temperature 0, else mean + temperature * std * noise."""
        mean = Actor(self.config, self.action_dim).apply(
            {"params": self.params["actor"]}, observations, goals
        )
        return sample_gaussian(mean, self.config.actor_std, seed, temperature)

    @jax.jit
    def distance(self, observations: jax.Array, goals: jax.Array) -> jax.Array:
        """Estimated temporal distance from each observation to its goal, in environment steps."""
        return state_goal_distance(self.params["critic"], self.config, observations, goals)


def state_goal_distance(critic_params: Any, config: MQEConfig, observations: jax.Array,
                        goals: jax.Array) -> jax.Array:
    """min over heads of MRN(psi(s), psi(g)) / -log(gamma): the critic's distance in environment steps
    (psi(s) needs no action; the invariance loss pulls it onto phi(s, a) for the data's actions)."""
    psi = Critic(config).apply(
        {"params": critic_params}, jnp.concatenate([observations, goals], axis=0), method=Critic.psi
    )
    psi_s, psi_g = jnp.split(psi, 2, axis=1)
    return jnp.min(mrn_distance(psi_s, psi_g, config.num_components), axis=0) / config.step_scale


def create_seeds(seeds: Sequence[int], example_batch: dict[str, Any], config: MQEConfig) -> MQEAgent:
    """Several independently initialised agents stacked on a leading axis, for `update_many_seeds`."""
    agents = [MQEAgent.create(s, example_batch, config) for s in seeds]
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *agents)


@jax.jit
def update_many_seeds(agents: MQEAgent, batches: Batch) -> tuple[MQEAgent, dict]:
    """Scan over updates, vmapped over seeds: `batches` leaves are (updates, seeds, B, ...)."""

    def one_update(stacked: MQEAgent, batch: Batch) -> tuple[MQEAgent, dict]:
        return jax.vmap(lambda agent, b: agent._update(b))(stacked, batch)

    agents, infos = jax.lax.scan(one_update, agents, batches)
    return agents, jax.tree_util.tree_map(lambda x: x[-1], infos)


# ----------------------------------------------------------------------------- presets


def get_config(name: str) -> MQEConfig:
    """A named preset: 'ogbench_state', 'ogbench_pixel', 'bridge', 'sim' or 'tiny'."""
    presets = {
        # OGBench state-based (paper table of network configuration); alpha is set per environment.
        # Adam on one flat vector: the same steps, 1.16x the single-seed update on an H200 (docs/benchmarks.md).
        "ogbench_state": MQEConfig(name="ogbench_state", flat_optimizer=True),
        "ogbench_pixel": MQEConfig(
            name="ogbench_pixel", p_next=0.1, alpha=3.0, encoder="impala_small"
        ),
        # BridgeData: ResNet-34 encoders (actor and critic not shared), latent 256, batch 128.
        "bridge": MQEConfig(
            name="bridge",
            batch_size=128,
            latent_dim=256,
            critic_hidden_dims=(256, 256, 256),
            actor_hidden_dims=(256, 256, 256),
            gamma=0.98,
            p_next=0.2,
            # bf16 convolutions and matmul operands: float32 ResNet-34s ran 5 steps/s on an H200.
            encoder="resnet34_bf16",
            matmul_precision="bfloat16",
        ),
        # The twin's demo policy: Bridge's widths and discount on the OGBench pixel encoder, small
        # enough to keep in the repository and to serve on a CPU (alpha as for visual manipulation).
        "sim": MQEConfig(
            name="sim",
            latent_dim=256,
            critic_hidden_dims=(256, 256, 256),
            actor_hidden_dims=(256, 256, 256),
            gamma=0.98,
            p_next=0.1,
            alpha=3.0,
            encoder="impala_small",
        ),
        # Small widths for CPU tests and toy problems.
        "tiny": MQEConfig(
            name="tiny",
            batch_size=64,
            latent_dim=64,
            critic_hidden_dims=(64, 64),
            actor_hidden_dims=(64, 64),
            gamma=0.95,
        ),
    }
    if name not in presets:
        raise ValueError(f"unknown MQE preset '{name}'; choose one of {sorted(presets)}")
    return presets[name]
