"""Multistep Quasimetric Estimation (MQE): the whole agent in one file.

Critic: phi(s, a) and psi(g) map into R^{N*M}; d((s, a), g) = MRN(phi(s, a), psi(g)), two ensemble
heads. It is trained with the multistep LINEX backup over the whole B x B batch (state-action i,
goal j) towards the waypoint distance discounted by gamma^{k'}, plus the action-invariance loss
that pulls psi(s) onto phi(s, a) for the dataset's own actions.
Actor: a goal-conditioned Gaussian with constant std, trained with DDPG+BC against
q = -min_heads d(phi(s, pi(s, g)), psi(g)), normalised by the batch's mean |q|.
One Adam step on critic + actor per update; no target networks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import flax
import jax
import jax.numpy as jnp
import optax

from mqe_model.agents import ANY_VALUE, scan_updates
from mqe_model.data.dataset import Dataset
from mqe_model.data.sampling import GoalSampler, SamplerConfig, check_probability
from mqe_model.networks.mlp import gaussian_log_prob, sample_gaussian
from mqe_model.networks.mqe import Actor, Critic, encode_actor_goals
from mqe_model.quasimetric import mrn_distance, mrn_pairwise, mrn_pairwise_naive

Batch = dict[str, jax.Array]
HAS_DISTANCE = True  # the act answers the critic's temporal distance to the goal
PAIRWISE = {"fused": mrn_pairwise, "naive": mrn_pairwise_naive}  # Config.pairwise
MATMUL_PRECISIONS = ("float32", "tensorfloat32", "bfloat16")  # Config.matmul_precision


@dataclasses.dataclass(frozen=True)
class Config:
    """Hyperparameters of the MQE agent; presets come from `get_config(name)`."""

    name: str = "ogbench_state"  # preset this config came from
    lr: float = 3e-4  # Adam learning rate for critic and actor
    flat_optimizer: bool = False  # Adam on all parameters raveled into one vector (optax.flatten): the same steps in fewer, larger kernels
    batch_size: int = 256  # samples per update; the backup uses all B x B pairs
    latent_dim: int = 512  # size of phi(s, a) and psi(g), split into MRN components
    critic_hidden_dims: Sequence[int] = (512, 512, 512)  # phi and psi MLP widths
    actor_hidden_dims: Sequence[int] = (512, 512, 512)  # policy MLP widths
    layer_norm: bool = True  # LayerNorm after each hidden GELU of the critic (the actor's MLP always has it)
    num_components: int = 8  # MRN components N
    num_heads: int = 2  # critic ensemble heads; q takes the minimum distance over them
    gamma: float = 0.995  # discount: goals are Geom(1 - gamma) steps ahead; d is in units of -log(gamma) per step
    lam: float = 0.95  # waypoint discount lambda: waypoints are Geom(1 - lambda) steps ahead, capped at the goal
    p_next: float = 0.2  # probability that the waypoint is the next state (k' = 1)
    alpha: float = 1.0  # behaviour-cloning weight of the actor loss
    actor_p_random_goal: float = 0.0  # chance an actor goal is a random state, not a future one (OGBench stitch: 0.5)
    zeta: float = 1.0  # weight of the action-invariance loss
    linex_clip: float = 5.0  # above this delta the LINEX backup uses its linear branch
    diag_weight: float = 0.5  # weight of the positive (diagonal) pairs in the backup mean
    actor_std: float = 1.0  # constant standard deviation of the Gaussian policy
    encoder: str | None = None  # image encoder ('impala_small', 'resnet34', ...) or None for states
    pairwise: str = "fused"  # all-pairs MRN: 'fused' (memory-lean) or 'naive' (the broadcast reference, benchmarks' baseline)
    matmul_precision: str = "float32"  # network matmuls: 'float32', 'tensorfloat32' or 'bfloat16' (operands rounded, f32 accumulate)

    def __post_init__(self) -> None:
        if self.latent_dim % (2 * self.num_components):
            raise ValueError(
                f"latent_dim {self.latent_dim} must be divisible by 2 * num_components "
                f"({2 * self.num_components}); change one of them"
            )
        if not (0 < self.gamma < 1 and 0 < self.lam < 1 and 0 <= self.p_next <= 1):
            raise ValueError("need 0 < gamma < 1, 0 < lam < 1 and 0 <= p_next <= 1")
        if self.pairwise not in PAIRWISE:
            raise ValueError(f"pairwise must be one of {', '.join(PAIRWISE)}, got {self.pairwise!r}")
        if self.matmul_precision not in MATMUL_PRECISIONS:
            raise ValueError(f"matmul_precision must be one of {', '.join(MATMUL_PRECISIONS)}, "
                             f"got {self.matmul_precision!r}")
        if self.batch_size < 2:
            raise ValueError("batch_size must be >= 2: the backup contrasts pairs within a batch")
        check_probability("actor_p_random_goal", self.actor_p_random_goal)

    @property
    def step_scale(self) -> float:
        """Distance per environment step at the backup's fixed point: -log(gamma)."""
        return -math.log(self.gamma)


# Fields that older checkpoints carry, each with the value that gives the behaviour this agent keeps:
# ablations whose experiments concluded that they lose. A checkpoint that sets one of them to that value
# loads (the field is dropped); one trained with another value is refused, as it is another agent.
REMOVED_FIELDS: dict[str, Any] = {
    "actor_layer_norm": True, "max_waypoint_offset": 0, "max_goal_offset": 0,
    "actor_bc_on_random_goals": True, "actor_heads": "nearest", "actor_goal_pairs": "own",
    "actor_goal_samples": ANY_VALUE, "invariance_form": "exp", "invariance_moves": "both",
    "invariance_actions": 1, "max_target_steps": None,
}


def make_critic(config: Config) -> Critic:
    """The critic network of `config`."""
    return Critic(config.encoder, config.critic_hidden_dims, config.latent_dim, config.num_heads, config.layer_norm)


def make_actor(config: Config, action_dim: int) -> Actor:
    """The actor network of `config`."""
    return Actor(config.encoder, config.actor_hidden_dims, action_dim)


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
    Its fixed point is dist = dist_w - k log(gamma).
    """
    delta = dist - jax.lax.stop_gradient(dist_w)
    discount = jnp.power(gamma, k.astype(dist.dtype))[None, :, None]
    # exp of the clipped delta keeps the unused branch finite, so gradients stay finite too.
    linex = discount * jnp.exp(jnp.minimum(delta, clip)) - dist
    per_pair = jnp.where(delta > clip, delta, linex)
    diagonal = jnp.diagonal(per_pair, axis1=-2, axis2=-1)
    return (1.0 - diag_weight) * jnp.mean(per_pair) + diag_weight * jnp.mean(diagonal)


def invariance_loss(d: jax.Array) -> jax.Array:
    """Action invariance over d = d(psi(s), phi(s, a)): mean((exp(-d) - 1)^2)."""
    return jnp.mean(jnp.square(jnp.exp(-d) - 1.0))


class CriticForward(NamedTuple):
    """The critic's passes over a batch, computed once and shared by the critic and actor losses."""

    phi: jax.Array  # (E, B, latent) phi(s_i, a_i) for the data's actions
    psi_goals: jax.Array  # (E, B, latent) psi of the critic goals
    psi_waypoints: jax.Array  # (E, B, latent) psi of the waypoints
    psi_states: jax.Array  # (E, B, latent) psi of the states themselves (action invariance)
    state_features: jax.Array  # (B, F) the encoder's output for the states (F = obs dim for states)


def critic_forward(critic_params: Any, batch: Batch, config: Config) -> CriticForward:
    """One encoder call and one psi call over goals, waypoints and states together (larger matmuls,
    a third of the launches), then phi on the states already encoded: each image is encoded once."""
    critic = make_critic(config)
    variables = {"params": critic_params}
    stacked = jnp.concatenate([batch["goals"], batch["waypoints"], batch["observations"]], axis=0)
    features = critic.apply(variables, stacked, method=Critic.features)
    psi_all = critic.apply(variables, features, method=Critic.psi_of_features)
    psi_g, psi_w, psi_s = jnp.split(psi_all, 3, axis=1)
    state_features = jnp.split(features, 3, axis=0)[2]
    phi = critic.apply(variables, state_features, batch["actions"], method=Critic.phi_of_features)
    return CriticForward(phi, psi_g, psi_w, psi_s, state_features)


def critic_loss(
    params: Any, batch: Batch, config: Config, forward: CriticForward | None = None
) -> tuple[jax.Array, dict]:
    """Backup + zeta * invariance; metrics under `critic/`. `forward`: the batch's `critic_forward`
    under `params` when the caller already has it (it is recomputed otherwise)."""
    if forward is None:
        forward = critic_forward(params["critic"], batch, config)
    phi, psi_g, psi_w, psi_s = forward.phi, forward.psi_goals, forward.psi_waypoints, forward.psi_states

    pairwise = PAIRWISE[config.pairwise]
    dist = pairwise(phi, psi_g, num_components=config.num_components)
    dist_w = pairwise(psi_w, psi_g, num_components=config.num_components)
    backup = backup_loss(
        dist, dist_w, batch["waypoint_offsets"], config.gamma, config.linex_clip, config.diag_weight
    )
    d_inv = mrn_distance(psi_s, phi, config.num_components)
    invariance = invariance_loss(d_inv)
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
        # costs an all-pairs distance about the origin its precision (quasimetric.mrn_pairwise)
        "critic/latent_centre_sq": jnp.mean(jnp.sum(jnp.square(centre), axis=-1)),
        "critic/latent_spread_sq": jnp.mean(jnp.sum(jnp.square(psi_g - centre), axis=-1)),
    }
    return loss, info


def actor_loss(
    params: Any, batch: Batch, config: Config, forward: CriticForward | None = None
) -> tuple[jax.Array, dict]:
    """DDPG+BC: -mean(q) / stop_grad(mean |q|) - alpha * mean(log pi(a | s, g)); metrics under `actor/`.

    q = -min_heads d(phi(s, pi(s, g)), psi(g)) on each state's own actor goal. The critic is frozen
    (stop-gradient on its parameters and on what `forward` carries), so this loss moves only the
    actor, whether or not `forward` is shared with `critic_loss`."""
    observations, goals = batch["observations"], batch["actor_goals"]
    frozen = {"params": jax.lax.stop_gradient(params["critic"])}
    critic = make_critic(config)
    if forward is None:
        state_features = critic.apply(frozen, observations, method=Critic.features)
    else:  # the critic loss already encoded the states
        state_features = jax.lax.stop_gradient(forward.state_features)
    # Actor goals stay out of the critic's stacked pass: they need no backward pass (measured on an
    # H100: stacking them cost 3-7% of the state-based update).
    psi = critic.apply(frozen, goals, method=Critic.psi)
    mean = make_actor(config, batch["actions"].shape[-1]).apply({"params": params["actor"]}, observations, goals)
    phi = critic.apply(frozen, state_features, jnp.clip(mean, -1.0, 1.0), method=Critic.phi_of_features)
    q = -jnp.min(mrn_distance(phi, psi, config.num_components), axis=0)
    # The 1e-6 only guards a batch whose q is exactly zero everywhere (never in practice).
    q_loss = -jnp.mean(q) / jax.lax.stop_gradient(jnp.mean(jnp.abs(q)) + 1e-6)
    log_prob = gaussian_log_prob(mean, config.actor_std, batch["actions"])
    bc_loss = -config.alpha * jnp.mean(log_prob)
    loss = q_loss + bc_loss
    info = {
        "actor/loss": loss,
        "actor/q_loss": q_loss,
        "actor/bc_loss": bc_loss,
        "actor/q": jnp.mean(q),
        "actor/log_prob": log_prob.mean(),
        "actor/mse": jnp.mean(jnp.square(mean - batch["actions"])),
    }
    return loss, info


# ----------------------------------------------------------------------------- agent


def _optimizer(config: Config) -> optax.GradientTransformation:
    adam = optax.adam(config.lr)
    return optax.flatten(adam) if config.flat_optimizer else adam


class Agent(flax.struct.PyTreeNode):
    """Immutable MQE agent: parameters, optimizer state, RNG, step and a static config."""

    params: Any
    opt_state: Any
    rng: jax.Array
    step: jax.Array
    config: Config = flax.struct.field(pytree_node=False)
    action_dim: int = flax.struct.field(pytree_node=False)

    @classmethod
    def create(cls, seed: int, example_batch: dict[str, Any], config: Config) -> Agent:
        """Initialise parameters from the shapes of `example_batch`."""
        rng = jax.random.PRNGKey(seed)
        rng, critic_key, actor_key = jax.random.split(rng, 3)
        obs = jnp.asarray(example_batch["observations"][:1])
        actions = jnp.asarray(example_batch["actions"][:1])
        action_dim = actions.shape[-1]
        params = {
            "critic": make_critic(config).init(critic_key, obs, actions)["params"],
            "actor": make_actor(config, action_dim).init(actor_key, obs, obs)["params"],
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

    def _update(self, batch: Batch) -> tuple[Agent, dict]:
        grads, info = jax.grad(self.total_loss, has_aux=True)(self.params, batch)
        updates, opt_state = _optimizer(self.config).update(grads, self.opt_state, self.params)
        params = optax.apply_updates(self.params, updates)
        info["grad/norm"] = optax.tree.norm(grads)
        return self.replace(params=params, opt_state=opt_state, step=self.step + 1), info

    @jax.jit
    def update(self, batch: Batch) -> tuple[Agent, dict]:
        """One Adam step on critic + actor."""
        return self._update(batch)

    @jax.jit
    def update_many(self, batches: Batch) -> tuple[Agent, dict]:
        """Several updates in one dispatch: `batches` has a leading axis of updates (lax.scan)."""
        return scan_updates(self, batches)

    @jax.jit
    def sample_actions(
        self, observations: jax.Array, goals: jax.Array, seed: jax.Array, temperature: float = 0.0
    ) -> jax.Array:
        """Actions in [-1, 1]: the clipped mean at temperature 0, else mean + temperature * std * noise."""
        mean = make_actor(self.config, self.action_dim).apply({"params": self.params["actor"]}, observations, goals)
        return sample_gaussian(mean, self.config.actor_std, seed, temperature)

    @jax.jit
    def distance(self, observations: jax.Array, goals: jax.Array) -> jax.Array:
        """Estimated temporal distance from each observation to its goal, in environment steps."""
        return state_goal_distance(self.params["critic"], self.config, observations, goals)


def state_goal_distance(critic_params: Any, config: Config, observations: jax.Array,
                        goals: jax.Array) -> jax.Array:
    """min over heads of MRN(psi(s), psi(g)) / -log(gamma): the critic's distance in environment steps
    (psi(s) needs no action; the invariance loss pulls it onto phi(s, a) for the data's actions)."""
    psi = make_critic(config).apply(
        {"params": critic_params}, jnp.concatenate([observations, goals], axis=0), method=Critic.psi
    )
    psi_s, psi_g = jnp.split(psi, 2, axis=1)
    return jnp.min(mrn_distance(psi_s, psi_g, config.num_components), axis=0) / config.step_scale


def create_seeds(seeds: Sequence[int], example_batch: dict[str, Any], config: Config) -> Agent:
    """Several independently initialised agents stacked on a leading axis, for `update_many_seeds`."""
    agents = [Agent.create(s, example_batch, config) for s in seeds]
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *agents)


@jax.jit
def update_many_seeds(agents: Agent, batches: Batch) -> tuple[Agent, dict]:
    """Scan over updates, vmapped over seeds: `batches` leaves are (updates, seeds, B, ...)."""

    def one_update(stacked: Agent, batch: Batch) -> tuple[Agent, dict]:
        return jax.vmap(lambda agent, b: agent._update(b))(stacked, batch)

    agents, infos = jax.lax.scan(one_update, agents, batches)
    return agents, jax.tree_util.tree_map(lambda x: x[-1], infos)


# ----------------------------------------------------------------------------- data and inference


def make_sampler(dataset: Dataset, config: Config) -> GoalSampler:
    """The batch sampler MQE trains on: critic goals, waypoints and actor goals (`data.sampling`)."""
    return GoalSampler(dataset, SamplerConfig(config.gamma, config.lam, config.p_next, config.actor_p_random_goal))


# encode_both(params, x) -> (the actor encoder's features, the critic encoder's features) of x
EncodeBoth = Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]]


def inference_fns(config: Config, action_dim: int, clip: bool = True, encode_both: EncodeBoth | None = None
                  ) -> tuple[Callable[[Any, jax.Array], jax.Array], Callable[..., tuple[jax.Array, jax.Array]]]:
    """Pure inference functions split at the goal: `encode_goals(params, goals) -> codes` and
    `act(params, observations, codes) -> (normalized actions, distance in steps)`, the actions clipped
    to [-1, 1] (with `clip=False`, the policy's raw mean, for sampling around it).

    A goal's codes are the critic's psi(g) of every head and the actor encoder's goal features, flattened
    into one float32 row per goal, so a step runs the two encoders on the observation only. `encode_both`
    runs both encoders (a serving layout's, `networks.serving`); by default each from its own tree."""
    critic, actor = make_critic(config), make_actor(config, action_dim)
    psi_size = config.num_heads * config.latent_dim

    def separate(params: Any, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        critic_features = critic.apply({"params": params["critic"]}, x, method=Critic.features)
        return encode_actor_goals(params["actor"], x, config.encoder), critic_features

    encode = encode_both or separate

    def encode_goals(params: Any, goals: jax.Array) -> jax.Array:
        actor_features, critic_features = encode(params, goals)
        psi = critic.apply({"params": params["critic"]}, critic_features, method=Critic.psi_of_features)
        rows = goals.shape[0]
        return jnp.concatenate([jnp.swapaxes(psi, 0, 1).reshape(rows, psi_size).astype(jnp.float32),
                                actor_features.reshape(rows, -1).astype(jnp.float32)], axis=-1)

    def act(params: Any, observations: jax.Array, codes: jax.Array) -> tuple[jax.Array, jax.Array]:
        psi_goals = jnp.swapaxes(codes[:, :psi_size].reshape(codes.shape[0], config.num_heads, -1), 0, 1)
        # A state actor takes raw goals (the observation's shape); an encoder's features are flat.
        goal_shape = observations.shape[1:] if config.encoder is None else (-1,)
        actor_goals = codes[:, psi_size:].reshape(codes.shape[0], *goal_shape)
        actor_features, critic_features = encode(params, observations)
        mean = actor.apply({"params": params["actor"]}, actor_features, actor_goals,
                           goals_encoded=True, observations_encoded=True)
        psi_states = critic.apply({"params": params["critic"]}, critic_features, method=Critic.psi_of_features)
        d = jnp.min(mrn_distance(psi_states, psi_goals, config.num_components), axis=0)
        return (jnp.clip(mean, -1.0, 1.0) if clip else mean), d / config.step_scale

    return encode_goals, act


# ----------------------------------------------------------------------------- presets


def get_config(name: str) -> Config:
    """A named preset: 'ogbench_state', 'ogbench_pixel', 'bridge', 'sim' or 'tiny'."""
    presets = {
        # OGBench state-based (paper table of network configuration); alpha is set per environment.
        # Adam on one flat vector: the same steps, 1.16x the single-seed update on an H200 (docs/performance.md).
        "ogbench_state": Config(name="ogbench_state", flat_optimizer=True),
        "ogbench_pixel": Config(name="ogbench_pixel", p_next=0.1, alpha=3.0, encoder="impala_small"),
        # BridgeData: ResNet-34 encoders (actor and critic not shared), latent 256, batch 128.
        "bridge": Config(
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
        "sim": Config(
            name="sim",
            latent_dim=256,
            critic_hidden_dims=(256, 256, 256),
            actor_hidden_dims=(256, 256, 256),
            gamma=0.98,
            p_next=0.1,
            alpha=3.0,
            # bf16 convolutions, float32 MLPs: the losses stay within 1e-3 of the float32 stack.
            encoder="impala_small_bf16",
        ),
        # Small widths for CPU tests.
        "tiny": Config(
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
