"""XLA's own estimate of what one MQE update costs (flops, bytes accessed, transcendentals), read from
the compiled program without running it, for the configurations `benchmarks.train_step` times, each
as a ratio to the first. It tells whether a variant adds work, or only time: an update that takes
2.9x as long with 3% more flops and 15% more bytes (the `actor_goal_pairs=distances` question of
docs/benchmarks.md) loses its time elsewhere (launches, poor fusion). The estimate is the backend's:
on a machine without a GPU, the CPU compiler's.

    python -m benchmarks.update_cost --precisions float32 --variants actor_goal_pairs=distances
    python -m benchmarks.update_cost --seeds 2 --precisions tensorfloat32 --variants "actor_goal_pairs=sampled actor_goal_samples=16"
"""

from __future__ import annotations

import jax
import numpy as np
import tyro

from benchmarks.train_step import BenchConfig, random_batches, variant_configs
from mqe_model.agents import mqe

FIGURES = ("flops", "bytes accessed", "transcendentals")


def update_cost(config: mqe.MQEConfig, cfg: BenchConfig) -> dict[str, float]:
    """XLA's cost estimate of one update of `cfg.seeds` vmapped seeds. A dispatch of one update: XLA
    counts a loop's body once, whatever its trip count, so `--scan` does not apply here."""
    rng = np.random.default_rng(0)
    agents = mqe.create_seeds(list(range(cfg.seeds)), random_batches(rng, (), cfg, 2), config)
    batches = random_batches(rng, (1, cfg.seeds), cfg, config.batch_size)
    compiled = jax.jit(mqe.update_many_seeds).lower(agents, batches).compile()
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, list) else analysis  # a list on older JAX
    return {key: float(analysis.get(key, float("nan"))) for key in FIGURES}


def main(cfg: BenchConfig) -> None:
    device = jax.devices()[0]
    print(f"device: {device.device_kind} ({device.platform}), jax {jax.__version__}; "
          f"XLA's estimate of one update of {cfg.seeds} vmapped seed(s)")
    print(f"{'variant':<48}" + "".join(f"{key:>24}" for key in FIGURES))
    baseline = None
    for name, config in variant_configs(cfg, device.platform).items():
        cost = update_cost(config, cfg)
        baseline = baseline or cost
        print(f"{name:<48}" + "".join(f"{cost[k]:>15.3g} ({cost[k] / baseline[k]:.2f}x)" for k in FIGURES))


if __name__ == "__main__":
    main(tyro.cli(BenchConfig))
