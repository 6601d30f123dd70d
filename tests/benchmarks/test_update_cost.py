"""benchmarks.update_cost on the CPU: XLA's estimate of one update, per configuration, as ratios."""

from __future__ import annotations

import re

from benchmarks import train_step, update_cost


def tiny(**overrides) -> train_step.BenchConfig:
    return train_step.BenchConfig(preset="tiny", obs_dim=4, action_dim=2, precisions=("float32",), **overrides)


def test_more_actor_rows_cost_more_flops_and_the_baseline_is_one():
    cfg = tiny(seeds=1)
    configs = train_step.variant_configs(
        tiny(variants=("actor_goal_pairs=sampled actor_goal_samples=4",)), "cpu")
    own = update_cost.update_cost(configs["fused float32"], cfg)
    sampled = update_cost.update_cost(configs["actor_goal_pairs=sampled actor_goal_samples=4 float32"], cfg)
    assert all(own[key] > 0 for key in update_cost.FIGURES)
    assert sampled["flops"] > own["flops"]  # four actor and phi passes per state instead of one
    two_seeds = update_cost.update_cost(configs["fused float32"], tiny(seeds=2))
    assert 1.8 < two_seeds["flops"] / own["flops"] < 2.2  # vmapped seeds: twice the work


def test_main_prints_each_configuration_as_a_ratio_to_the_first(capsys):
    update_cost.main(tiny(seeds=1, variants=("actor_goal_pairs=distances",)))
    lines = capsys.readouterr().out.splitlines()
    rows = {line[:48].strip(): re.findall(r"\(([\d.]+)x\)", line) for line in lines[2:]}
    assert list(rows) == ["naive f32 (baseline)", "fused float32", "actor_goal_pairs=distances float32"]
    assert rows["naive f32 (baseline)"] == ["1.00"] * 3 and all(len(r) == 3 for r in rows.values())
