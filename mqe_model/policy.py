"""Load a trained policy for inference: `params` and metadata only, never the optimizer state.

    policy = load_policy("runs/mqe/checkpoints")          # latest step; or .../checkpoints/<step>
    act = jax.jit(policy.act_fn)
    actions, distance = act(policy.params, observations, goals)   # robot units; steps or NaN

    codes = jax.jit(policy.goal_fn)(policy.params, goals)          # once per goal
    actions, distance = jax.jit(policy.act_coded_fn)(policy.params, observations, codes)  # each step

Observations and goals are what the network was trained on: float32 (B, D) states, or uint8
(B, H, W, 3) images already resized with `mqe_client.images.preprocess_image` to the
checkpoint's `image` size and method.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mqe_model import checkpoints
from mqe_model.agents import mqe, registry
from mqe_model.agents.configs import config_from_json
from mqe_model.checkpoints import CheckpointError
from mqe_model.data.normalization import ActionStats
from mqe_model.networks import serving
from mqe_model.networks.encoders import CONV_LOWERINGS, with_kernels_in_compute_dtype
from mqe_model.networks.serving import (
    ENCODER_ARRANGEMENTS as ENCODER_ARRANGEMENTS,  # the server's choices
)

logger = logging.getLogger(__name__)

# encode_goals(params, goals) -> goal codes: what the act function needs of each goal, computed once
GoalFn = Callable[[Any, jax.Array], jax.Array]
# act(params, observations, codes) -> (actions in robot units, distance in steps or NaN)
ActFn = Callable[[Any, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def params_fingerprint(params: Any, config_json: dict[str, Any], action_stats: dict[str, Any]) -> str:
    """sha256 over the parameter bytes (in tree order), the config JSON and the normalization stats."""
    h = hashlib.sha256()
    leaves, _ = jax.tree_util.tree_flatten_with_path(params)
    for path, leaf in leaves:
        arr = np.ascontiguousarray(np.asarray(leaf))
        h.update(f"{jax.tree_util.keystr(path)}:{arr.dtype.str}:{arr.shape}".encode())
        h.update(arr.tobytes())
    h.update(json.dumps(config_json, sort_keys=True).encode())
    h.update(json.dumps(action_stats, sort_keys=True).encode())
    return h.hexdigest()


@dataclasses.dataclass(frozen=True)
class Policy:
    """A loaded checkpoint: weights, config, normalization and a pure act function."""

    agent_name: str  # 'mqe', 'gcbc' or 'gciql'
    config: Any  # the agent's frozen config dataclass
    metadata: dict[str, Any]  # the checkpoint's metadata item
    params: Any  # inference weights (jax arrays)
    action_stats: ActionStats  # normalization of the actions, robot units
    fingerprint: str  # sha256 of params + config + normalization stats, hex
    act_fn: Callable[[Any, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]  # see module docstring
    goal_fn: Callable[[Any, jax.Array], jax.Array]  # goals -> the codes act_coded_fn takes
    act_coded_fn: Callable[[Any, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]  # act_fn on codes

    @property
    def observation_shape(self) -> tuple[int, ...]:
        """Shape of one observation (and one goal) as the network expects it."""
        return tuple(self.metadata["observation"]["shape"])

    @property
    def action_dim(self) -> int:
        """Dimension of one action."""
        return self.action_stats.dim

    @property
    def has_distance(self) -> bool:
        """Whether `act_fn` answers a temporal distance (MQE) rather than NaN."""
        return registry.get(self.agent_name).HAS_DISTANCE

    @property
    def step(self) -> int:
        """Training step of the checkpoint."""
        return int(self.metadata["step"])


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


def inference_fns(agent: str, config: Any, stats: ActionStats, sampling: ActionSampling | None = None
                  ) -> tuple[GoalFn, Callable[..., tuple[jax.Array, jax.Array]]]:
    """`goal_fn(params, goals) -> codes` and `act_coded_fn(params, observations, codes) ->
    (actions in robot units, distance in steps or NaN)`: the agent's inference functions with the
    checkpoint's un-normalization applied. With `sampling`, the act samples the policy and takes a
    standard normal noise (rows, A) fourth, so the caller owns the randomness (one generator per
    episode makes an evaluation independent of how its episodes are batched)."""
    module = registry.get(agent)
    if sampling is None:
        goal_fn, normalized_act = module.inference_fns(config, stats.dim)
        return goal_fn, _in_robot_units(normalized_act, stats)
    goal_fn, act_mean = module.inference_fns(config, stats.dim, clip=False)
    scale = sampling.temperature * config.actor_std

    def act_sampled(params: Any, observations: jax.Array, codes: jax.Array, noise: jax.Array
                    ) -> tuple[jax.Array, jax.Array]:
        mean, distance = act_mean(params, observations, codes)
        return mean + scale * noise, distance

    return goal_fn, _in_robot_units(act_sampled, stats)


def encoder_arrangements(agent: str, config: Any) -> tuple[str, ...]:
    """The `serving_fns` encoder arrangements that apply to a policy (`networks.serving`): 'separate'
    always; 'stacked' and 'twin' only for image MQE, whose two encoders see the same image."""
    return serving.encoder_arrangements(config.encoder) if agent == "mqe" else ("separate",)


def serving_fns(agent: str, config: Any, stats: ActionStats, encoders: str = "separate", conv: str = "xla"
                ) -> tuple[Callable[[Any], Any], GoalFn, ActFn]:
    """`(prepare, goal_fn, act_coded_fn)`: `inference_fns` over `prepare(params)`, the layout a server
    keeps on its device: with `encoders` 'stacked' or 'twin' image MQE runs its two encoders as one
    network (`networks.serving`), its convolutions computed as `conv` says (`with_conv`). Either way
    `prepare` casts the convolution kernels of a bf16 encoder to bf16 once
    (`encoders.with_kernels_in_compute_dtype`: the numbers each call would cast them to)."""
    if encoders not in (applicable := encoder_arrangements(agent, config)):
        raise ValueError(f"encoders={encoders!r} does not apply to this {agent} policy; choose one of "
                         f"{list(applicable)}")
    config = with_conv(config, conv)

    def cast(params: Any) -> Any:
        return with_kernels_in_compute_dtype(params, config.encoder)

    if encoders == "separate":
        goal_fn, normalized_act = registry.get(agent).inference_fns(config, stats.dim)
        return cast, goal_fn, _in_robot_units(normalized_act, stats)

    def prepare(params: Any) -> Any:
        return cast(serving.stack_encoders(params, config.encoder, twin=encoders == "twin"))

    goal_fn, normalized_act = mqe.inference_fns(
        config, stats.dim, encode_both=lambda params, x: serving.encode_stacked(params, x, config.encoder))
    return prepare, goal_fn, _in_robot_units(normalized_act, stats)


def with_conv(config: Any, conv: str) -> Any:
    """`config` with its image encoder's convolutions computed by XLA's convolution op (`conv='xla'`) or
    as strided slices and one matmul each (`'matmul'`, `encoders.conv_as_matmul`): the same weights and,
    to rounding, the same actions. A state policy has no convolutions and comes back unchanged."""
    if conv not in CONV_LOWERINGS:
        raise ValueError(f"conv={conv!r}: choose one of {', '.join(CONV_LOWERINGS)}")
    encoder = getattr(config, "encoder", None)
    if encoder is None:
        return config
    wanted = encoder.partition(":")[0] + ("" if conv == "xla" else f":{conv}")
    return config if wanted == encoder else dataclasses.replace(config, encoder=wanted)


def _in_robot_units(normalized_act: Callable[..., tuple[jax.Array, jax.Array]], stats: ActionStats
                    ) -> Callable[..., tuple[jax.Array, jax.Array]]:
    center, half = (jnp.asarray(x) for x in stats.center_and_half_range())

    def act_coded_fn(params: Any, observations: jax.Array, codes: jax.Array, *noise: jax.Array
                     ) -> tuple[jax.Array, jax.Array]:
        actions, distance = normalized_act(params, observations, codes, *noise)
        return center + half * jnp.clip(actions, -1.0, 1.0), distance

    return act_coded_fn


def load_policy(checkpoint_dir: str | Path, seed_index: int = 0) -> Policy:
    """Load `<workdir>/checkpoints/<step>`, or the latest step of a checkpoints root or workdir."""
    step_dir = checkpoints.resolve_step_dir(checkpoint_dir)
    metadata = checkpoints.read_metadata(step_dir)
    where = step_dir / checkpoints.METADATA_FILE
    name = metadata["agent"]
    try:
        config = config_from_json(name, metadata["config"])
        stats = ActionStats.from_json(metadata["action_stats"])
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{where}: {e}") from None
    params = checkpoints.restore_params(step_dir)
    num_seeds = int(metadata.get("num_seeds", 1))
    if num_seeds > 1:
        if not 0 <= seed_index < num_seeds:
            raise CheckpointError(f"{step_dir}: seed_index {seed_index} outside 0..{num_seeds - 1}")
        params = jax.tree_util.tree_map(lambda x: x[seed_index], params)
    params = jax.tree_util.tree_map(jnp.asarray, params)
    goal_fn, act_coded_fn = inference_fns(name, config, stats)

    def act_fn(params: Any, observations: jax.Array, goals: jax.Array) -> tuple[jax.Array, jax.Array]:
        return act_coded_fn(params, observations, goal_fn(params, goals))

    fingerprint = params_fingerprint(params, metadata["config"], metadata["action_stats"])
    logger.info("loaded %s step %s from %s (fingerprint %s)", name, metadata["step"], step_dir,
                fingerprint[:12])
    return Policy(name, config, metadata, params, stats, fingerprint, act_fn, goal_fn, act_coded_fn)
