"""A randomly initialised checkpoint written through the checkpoint API, for latency work and tests.

The weights are untrained (the actions mean nothing) but the layout, metadata, shapes and compute
are exactly those of a trained checkpoint of the same preset, which is all a latency benchmark or a
protocol test needs. Training a ResNet-34 to get a checkpoint would take hours on a CPU.

    python -m server.random_checkpoint --out /tmp/bridge --preset bridge --image-size 128
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

from server.runtime import WIDOWX_ACTION_NAMES

# Bridge-like action bounds in robot units: |dxyz| <= 0.05 m, |drpy| <= 0.25 rad.
BRIDGE_LOW = (-0.05, -0.05, -0.05, -0.25, -0.25, -0.25, 0.0)
BRIDGE_HIGH = (0.05, 0.05, 0.05, 0.25, 0.25, 0.25, 1.0)


def write_random_checkpoint(workdir: Path, agent: str = "mqe", preset: str = "bridge",
                            overrides: tuple[str, ...] = (), image_size: int | None = 128,
                            state_dim: int = 6, action_dim: int = 7, seed: int = 0) -> Path:
    """Write `<workdir>/checkpoints/0` with untrained weights; returns the step directory.

    `image_size` None writes a state policy of `state_dim` inputs (give a state preset, e.g. 'tiny').
    """
    from mqe_model import checkpoints
    from mqe_model.agents import registry
    from mqe_model.agents.configs import apply_overrides, config_to_json
    from mqe_model.data.normalization import ActionStats

    module = registry.get(agent)
    config = apply_overrides(module.get_config(preset), overrides)
    if image_size is not None and config.encoder is None:
        raise ValueError(f"preset {preset!r} of {agent} has no image encoder: write a state policy "
                         "(image size 0) or add an encoder, e.g. --set encoder=impala_tiny")
    if image_size is None:
        obs = np.zeros((2, state_dim), np.float32)
        image = None
    else:
        obs = np.zeros((2, image_size, image_size, 3), np.uint8)
        image = {"height": image_size, "width": image_size, "resize": "area"}
    low, high = ((BRIDGE_LOW, BRIDGE_HIGH) if action_dim == 7
                 else ((-1.0,) * action_dim, (1.0,) * action_dim))
    stats = ActionStats(mean=tuple((a + b) / 2 for a, b in zip(low, high, strict=True)),
                        std=tuple((b - a) / 4 for a, b in zip(low, high, strict=True)), low=low, high=high)
    example = {"observations": obs, "actions": np.zeros((2, action_dim), np.float32)}
    agent_state = module.Agent.create(seed, example, config)
    metadata = checkpoints.build_metadata(
        agent=agent, config=config_to_json(config), step=0, action_stats=stats.to_json(),
        image=image, observation={"shape": list(obs.shape[1:]), "dtype": str(obs.dtype)},
        dataset={"path": None, "format": "random-init", "fingerprint": None, "num_transitions": 0,
                 "action_names": list(WIDOWX_ACTION_NAMES) if action_dim == 7 else None,
                 "control_hz": 5.0},
        train={"note": "randomly initialised for latency measurements; never trained",
               "preset": preset, "set": list(overrides), "seed": seed},
    )
    manager = checkpoints.make_manager(Path(workdir) / "checkpoints", keep=1, asynchronous=False)
    try:
        checkpoints.save(manager, 0, agent_state, metadata)
        manager.wait_until_finished()
    finally:
        manager.close()
    return Path(workdir) / "checkpoints" / "0"


@dataclasses.dataclass(frozen=True)
class RandomCheckpointArgs:
    """Write a randomly initialised checkpoint (for latency measurements only)."""

    out: Path  # workdir to write (checkpoints/0 inside)
    agent: str = "mqe"  # mqe, gcbc or gciql
    preset: str = "bridge"  # agent preset
    set: tuple[str, ...] = ()  # config overrides key=value
    image_size: int = 128  # square image size; 0 for a state policy
    state_dim: int = 6  # state size when --image-size 0
    action_dim: int = 7  # action dimension


def main(argv: list[str] | None = None) -> int:
    """Console entry point."""
    import tyro

    args = tyro.cli(RandomCheckpointArgs, args=argv)
    try:
        path = write_random_checkpoint(args.out, args.agent, args.preset, args.set,
                                       args.image_size or None, args.state_dim, args.action_dim)
    except ValueError as e:
        print(f"random_checkpoint: error: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
