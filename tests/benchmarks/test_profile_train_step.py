"""benchmarks.profile_train_step on the CPU: overrides reach the profiled configuration; the run prints
its summary (no GPU kernels here, so no rows)."""

from __future__ import annotations

import pytest

from benchmarks import profile_train_step


def test_overrides_are_applied_and_bad_ones_refused():
    cfg = profile_train_step.ProfileConfig(set=("actor_goal_pairs=distances", "alpha=0.3"))
    config = cfg.agent_config()
    assert (config.actor_goal_pairs, config.alpha, config.pairwise) == ("distances", 0.3, "fused")
    with pytest.raises(SystemExit, match="actor_goal_pair"):
        profile_train_step.ProfileConfig(set=("actor_goal_pair=all",)).agent_config()


def test_a_tiny_profile_runs(capsys):
    profile_train_step.main(profile_train_step.ProfileConfig(preset="tiny", seeds=2, scan=2,
                                                             set=("actor_goal_pairs=distances",)))
    assert "kernel launches per update" in capsys.readouterr().out
