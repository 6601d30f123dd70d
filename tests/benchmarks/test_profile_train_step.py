"""benchmarks.profile_train_step on the CPU: overrides reach the profiled configuration; the run prints
its summary (no GPU kernels here, so no rows)."""

from __future__ import annotations

import pytest

from benchmarks import profile_train_step


def test_overrides_are_applied_and_bad_ones_refused():
    cfg = profile_train_step.ProfileConfig(set=("flat_optimizer=false", "alpha=0.3"))
    config = cfg.agent_config()
    assert (config.flat_optimizer, config.alpha, config.pairwise) == (False, 0.3, "fused")
    with pytest.raises(SystemExit, match="did you mean flat_optimizer"):
        profile_train_step.ProfileConfig(set=("flat_optimiser=false",)).agent_config()


def test_a_tiny_profile_runs(capsys):
    profile_train_step.main(profile_train_step.ProfileConfig(preset="tiny", seeds=2, scan=2,
                                                             set=("alpha=0.3",)))
    assert "kernel launches per update" in capsys.readouterr().out
