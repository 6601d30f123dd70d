"""The agents the pipeline trains, by name: config classes, samplers and inference functions.

Everything agent-specific that the train loop, checkpoints and the policy loader need is here, so
they never branch on the agent themselves.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from mqe_model.agents import gcbc, gciql, mqe
from mqe_model.data.dataset import Dataset
from mqe_model.data.relabel import RelabelConfig, RelabelSampler
from mqe_model.data.sampling import GoalSampler, SamplerConfig
from mqe_model.networks.encoders import make_encoder, twin_encoder, with_kernels_in_compute_dtype
from mqe_model.quasimetric import mrn_distance

AGENT_NAMES = ("mqe", "gcbc", "gciql")
# Batch fields that hold observations (images are augmented in all of them with one transform).
IMAGE_KEYS = ("observations", "next_observations", "goals", "waypoints", "actor_goals", "value_goals")

# act(params, observations, goals) -> (actions in [-1, 1] (normalized), distance in steps or NaN)
ActFn = Callable[[Any, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]
# encode_goals(params, goals) -> goal codes: what the act function needs of each goal, computed once
GoalFn = Callable[[Any, jax.Array], jax.Array]


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """What the pipeline needs to know about one agent."""

    name: str  # 'mqe', 'gcbc' or 'gciql'
    agent_class: type  # the flax.struct.PyTreeNode agent with create/update/update_many
    config_class: type  # its frozen config dataclass
    get_config: Callable[[str], Any]  # presets by name
    has_distance: bool  # whether act() answers a temporal distance


SPECS = {
    "mqe": AgentSpec("mqe", mqe.MQEAgent, mqe.MQEConfig, mqe.get_config, True),
    "gcbc": AgentSpec("gcbc", gcbc.GCBCAgent, gcbc.GCBCConfig, gcbc.get_config, False),
    "gciql": AgentSpec("gciql", gciql.GCIQLAgent, gciql.GCIQLConfig, gciql.get_config, False),
}


def spec(name: str) -> AgentSpec:
    """The spec of agent `name`, or a ValueError listing the known ones."""
    if name not in SPECS:
        raise ValueError(f"unknown agent {name!r}; choose one of {list(AGENT_NAMES)}")
    return SPECS[name]


def make_sampler(name: str, dataset: Dataset, config: Any) -> GoalSampler | RelabelSampler:
    """The batch sampler agent `name` trains on."""
    if name == "mqe":
        return GoalSampler(dataset, SamplerConfig(config.gamma, config.lam, config.p_next,
                                                  config.actor_p_random_goal,
                                                  mark_own_actor_goals=not config.actor_bc_on_random_goals,
                                                  max_waypoint_offset=config.max_waypoint_offset,
                                                  max_goal_offset=config.max_goal_offset))
    if name == "gcbc":
        return RelabelSampler(dataset, RelabelConfig(False, p_random_actor_goal=config.actor_p_random_goal))
    c = config
    return RelabelSampler(dataset, RelabelConfig(True, c.gamma, c.p_current_goal, c.p_trajectory_goal,
                                                 c.p_random_goal, c.actor_p_random_goal))


def make_goal_and_act_fns(name: str, config: Any, action_dim: int, clip: bool = True) -> tuple[GoalFn, ActFn]:
    """Pure inference functions split at the goal: `encode_goals(params, goals) -> codes` and
    `act(params, observations, codes) -> (clipped normalized actions, distance in steps or NaN)`
    (with `clip=False`, the policy's raw mean, for sampling around it).

    A server encodes each goal once and reuses its codes every step. For MQE the codes are the
    critic's psi(g) of every head and the actor encoder's goal features, flattened into one float32
    row per goal, so a step runs the two encoders on the observation only. GCBC and GCIQL fuse the
    goal with the observation before their first layer, so their codes are the goals themselves.
    """
    if name != "mqe":
        module = gcbc if name == "gcbc" else gciql

        def act_baseline(params: Any, observations: jax.Array, goals: jax.Array) -> tuple[jax.Array, jax.Array]:
            mean = module.actor_mean(params, observations, goals, config, action_dim)
            return (jnp.clip(mean, -1.0, 1.0) if clip else mean), jnp.full(observations.shape[:1], jnp.nan, jnp.float32)

        return (lambda params, goals: goals), act_baseline
    critic = mqe.Critic(config)

    def encode_both(params: Any, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        critic_features = critic.apply({"params": params["critic"]}, x, method=mqe.Critic.features)
        return mqe.encode_actor_goals(params["actor"], x, config), critic_features

    return _mqe_inference(config, action_dim, encode_both, clip)


@dataclasses.dataclass(frozen=True)
class ActionSampling:
    """Evaluate the Gaussian policy sampled instead of its mean: clip(mean + temperature * std *
    noise, -1, 1) with noise ~ N(0, I) drawn by the caller, as OGBench's `sample_actions` at this
    temperature. The paper's appendix says its OGBench policies sample at inference; OGBench's own
    protocol scores the mean (temperature 0)."""

    temperature: float  # scale of the actor's std (> 0)

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"action sampling needs a temperature > 0, got {self.temperature}")


# act(params, observations, codes, noise) -> (sampled actions in [-1, 1], distance); noise (rows, A) ~ N(0, I)
SampledActFn = Callable[[Any, jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def make_sampled_fns(name: str, config: Any, action_dim: int, sampling: ActionSampling) -> tuple[GoalFn, SampledActFn]:
    """`make_goal_and_act_fns` whose act samples the policy: it takes a standard normal `noise` of
    the actions' shape as a fourth argument, so the caller owns the randomness (one generator per
    episode makes an evaluation independent of how its episodes are batched)."""
    encode_goals, act_mean = make_goal_and_act_fns(name, config, action_dim, clip=False)
    scale = sampling.temperature * config.actor_std

    def act_sampled(params: Any, observations: jax.Array, codes: jax.Array, noise: jax.Array
                    ) -> tuple[jax.Array, jax.Array]:
        mean, distance = act_mean(params, observations, codes)
        return jnp.clip(mean + scale * noise, -1.0, 1.0), distance

    return encode_goals, act_sampled


@dataclasses.dataclass(frozen=True)
class CriticSelection:
    """A diagnostic policy for MQE: of the actor's action and `candidates - 1` fixed perturbations of
    it, take the one the critic rates best (or, as a control, worst). It asks whether the critic knows
    better actions than the actor extracted from it (not an OGBench protocol: that scores the actor's
    action)."""

    candidates: int  # actions rated per step, the actor's own included (>= 2)
    spread: float  # standard deviation of the perturbations, in normalized action units (> 0)
    pick: str = "best"  # 'best': the largest q; 'worst': the smallest (how much the ranking matters)
    seed: int = 0  # seed of the fixed perturbations (the same at every step)

    def __post_init__(self) -> None:
        if self.candidates < 2 or not self.spread > 0:
            raise ValueError(f"critic selection needs candidates >= 2 and spread > 0, got "
                             f"{self.candidates} and {self.spread}")
        if self.pick not in ("best", "worst"):
            raise ValueError(f"critic selection picks 'best' or 'worst', got {self.pick!r}")


def make_critic_selected_fns(config: Any, action_dim: int, selection: CriticSelection) -> tuple[GoalFn, ActFn]:
    """`make_goal_and_act_fns("mqe", ...)` with the act of `selection`: candidates = clip(actor mean +
    offsets), offsets[0] = 0; the chosen one maximizes the actor's q (the head reduction it trained on)."""
    encode_goals, act = make_goal_and_act_fns("mqe", config, action_dim)
    critic = mqe.Critic(config)
    offsets = selection.spread * jax.random.normal(jax.random.PRNGKey(selection.seed),
                                                   (selection.candidates, action_dim))
    offsets = offsets.at[0].set(0.0)

    def act_selected(params: Any, observations: jax.Array, codes: jax.Array) -> tuple[jax.Array, jax.Array]:
        mean, distance = act(params, observations, codes)
        candidates = jnp.clip(mean[None] + offsets[:, None], -1.0, 1.0)  # (N, rows, A)
        psi_goals = psi_of_codes(codes, config)
        features = critic.apply({"params": params["critic"]}, observations, method=mqe.Critic.features)

        def distances(actions: jax.Array) -> jax.Array:  # (rows,) the actor's q, negated
            phi = critic.apply({"params": params["critic"]}, features, actions, method=mqe.Critic.phi_of_features)
            return mqe.actor_distance(phi, psi_goals, config)

        rated = jax.vmap(distances)(candidates)
        chosen = jnp.argmin(rated, axis=0) if selection.pick == "best" else jnp.argmax(rated, axis=0)
        return jnp.take_along_axis(candidates, chosen[None, :, None], axis=0)[0], distance

    return encode_goals, act_selected


ENCODER_ARRANGEMENTS = ("separate", "stacked", "twin")  # how a server runs image MQE's two encoders


def encoder_arrangements(name: str, config: Any) -> tuple[str, ...]:
    """The `make_serving_fns` arrangements that apply to a policy: 'separate' always; 'stacked' for image
    MQE (two encoders of one architecture on the same input); 'twin' where that encoder is a ResNet."""
    if name != "mqe" or config.encoder is None:
        return ("separate",)
    try:
        twin_encoder(make_encoder(config.encoder))
    except ValueError:
        return ("separate", "stacked")
    return ENCODER_ARRANGEMENTS


def make_serving_fns(name: str, config: Any, action_dim: int, encoders: str = "separate"
                     ) -> tuple[Callable[[Any], Any], GoalFn, ActFn]:
    """`make_goal_and_act_fns` for a server: `(prepare, encode_goals, act)`, where the two functions
    take `prepare(params)` instead of the checkpoint's params. `encoders` (one of
    `encoder_arrangements(name, config)`): 'stacked' and 'twin' have `prepare` merge an image MQE
    policy's actor and critic encoders (`mqe.stack_encoders`) so each goal and each step runs them as
    one network (half the kernel launches; on the CPU it is slower, `docs/benchmarks.md`). Either way
    `prepare` casts the convolution kernels of a bf16 encoder to bf16 once
    (`encoders.with_kernels_in_compute_dtype`: the numbers each call would cast them to)."""
    if encoders not in (applicable := encoder_arrangements(name, config)):
        raise ValueError(f"encoders={encoders!r} does not apply to this {name} policy; choose one of "
                         f"{list(applicable)}")

    def cast(params: Any) -> Any:
        return with_kernels_in_compute_dtype(params, config.encoder)

    if encoders == "separate":
        return cast, *make_goal_and_act_fns(name, config, action_dim)

    def encode_both(params: Any, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return mqe.encode_stacked(params, x, config)

    def prepare(params: Any) -> Any:
        return cast(mqe.stack_encoders(params, config, twin=encoders == "twin"))

    return prepare, *_mqe_inference(config, action_dim, encode_both)


def _mqe_inference(config: Any, action_dim: int, encode_both: Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]],
                   clip: bool = True) -> tuple[GoalFn, ActFn]:
    """MQE's goal and act functions over `encode_both(params, x) -> (actor features, critic features)`."""
    critic = mqe.Critic(config)
    psi_size = config.num_heads * config.latent_dim

    def encode_goals(params: Any, goals: jax.Array) -> jax.Array:
        actor_features, critic_features = encode_both(params, goals)
        psi = critic.apply({"params": params["critic"]}, critic_features, method=mqe.Critic.psi_of_features)
        rows = goals.shape[0]
        return jnp.concatenate([jnp.swapaxes(psi, 0, 1).reshape(rows, psi_size).astype(jnp.float32),
                                actor_features.reshape(rows, -1).astype(jnp.float32)], axis=-1)

    def act(params: Any, observations: jax.Array, codes: jax.Array) -> tuple[jax.Array, jax.Array]:
        psi_goals = psi_of_codes(codes, config)
        actor_goals = codes[:, psi_size:].reshape(codes.shape[0], *_actor_goal_shape(observations, config))
        actor_features, critic_features = encode_both(params, observations)
        mean = mqe.Actor(config, action_dim).apply({"params": params["actor"]}, actor_features, actor_goals,
                                                   goals_encoded=True, observations_encoded=True)
        psi_states = critic.apply({"params": params["critic"]}, critic_features, method=mqe.Critic.psi_of_features)
        d = jnp.min(mrn_distance(psi_states, psi_goals, config.num_components), axis=0)
        return (jnp.clip(mean, -1.0, 1.0) if clip else mean), d / config.step_scale

    return encode_goals, act


def psi_of_codes(codes: jax.Array, config: Any) -> jax.Array:
    """The critic's psi(g) of every head, (heads, rows, latent), from MQE goal codes."""
    psi_size = config.num_heads * config.latent_dim
    return jnp.swapaxes(codes[:, :psi_size].reshape(codes.shape[0], config.num_heads, -1), 0, 1)


def _actor_goal_shape(observations: jax.Array, config: Any) -> tuple[int, ...]:
    # A state actor takes raw goals (the observation's shape); an encoder's features are flat.
    return observations.shape[1:] if config.encoder is None else (-1,)


def config_to_json(config: Any) -> dict[str, Any]:
    """An agent config as a JSON-ready dict (tuples become lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()}


def config_from_json(name: str, data: dict[str, Any]) -> Any:
    """Inverse of `config_to_json`: the frozen dataclass back, sequences as tuples."""
    cls = spec(name).config_class
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ValueError(f"{name} config has unknown field(s) {unknown}")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def _parse_value(text: str, annotation: Any) -> Any:
    """`text` as the type of a config field (int, float, bool, str, None, tuple of ints)."""
    kind = str(annotation)
    if text.lower() in ("none", "null") and "None" in kind:
        return None
    if "Sequence" in kind or "tuple" in kind:
        return tuple(int(v) for v in text.replace("(", "").replace(")", "").split(",") if v.strip())
    if "bool" in kind:
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"expected true or false, got {text!r}")
        return text.lower() in ("true", "1")
    if "float" in kind:
        return float(text)
    if "int" in kind:
        return int(text)
    return text


def apply_overrides(config: Any, overrides: tuple[str, ...]) -> Any:
    """`config` with `key=value` overrides applied; unknown keys raise with the closest names."""
    import difflib

    hints = typing.get_type_hints(type(config))
    changes = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise ValueError(f"--set {item!r}: expected key=value, e.g. --set alpha=0.03")
        if key not in hints:
            close = difflib.get_close_matches(key, hints, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; fields: {sorted(hints)}"
            raise ValueError(f"--set {key}: {type(config).__name__} has no field {key!r}{hint}")
        try:
            changes[key] = _parse_value(value.strip(), hints[key])
        except ValueError as e:
            raise ValueError(f"--set {key}={value}: {e}") from None
    return dataclasses.replace(config, **changes)
