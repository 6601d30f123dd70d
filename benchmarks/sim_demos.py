"""Success rate and episode length of each scripted primitive over many seeds.

python benchmarks/sim_demos.py --seeds 100               # without noise (the issue's >= 95% bar)
python benchmarks/sim_demos.py --seeds 100 --noise 0.1   # with the data generator's default noise
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import tyro


@dataclasses.dataclass(frozen=True)
class DemoBenchConfig:
    """What to measure."""

    seeds: int = 100  # scenes per primitive (seeds 0 .. seeds - 1)
    noise: float = 0.0  # action noise, std as a fraction of the per-step bounds


def main(cfg: DemoBenchConfig) -> None:
    """Print one line per primitive: successes, mean length, IK failures, failed seeds."""
    from robot_client.sim import SimConfig, WidowXSimEnv, demos

    env = WidowXSimEnv(seed=0, config=SimConfig(render_observations=False))
    for primitive in demos.PRIMITIVES:
        t0 = time.perf_counter()
        ok, lengths, ik, failed = 0, [], 0, []
        for seed in range(cfg.seeds):
            index, rng, place_xy = demos.reset_for(env, primitive, seed)
            ep = demos.run_primitive(env, primitive, index, rng, noise=cfg.noise, record=False,
                                     place_xy=place_xy)
            ok += ep.success
            lengths.append(env.steps)
            ik += ep.ik_failures
            if not ep.success:
                failed.append(seed)
        print(
            f"{primitive:12s} noise {cfg.noise}: {ok}/{cfg.seeds} succeeded, "
            f"mean length {np.mean(lengths):.1f} steps, IK failures {ik}, "
            f"failed seeds {failed}, {time.perf_counter() - t0:.1f} s"
        )


if __name__ == "__main__":
    main(tyro.cli(DemoBenchConfig))
