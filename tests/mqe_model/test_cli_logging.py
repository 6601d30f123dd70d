"""The simulators' warnings that no user can act on are dropped; every other warning still shows."""

from __future__ import annotations

import warnings

from mqe_model.cli_logging import quiet_simulator_warnings


def test_simulator_noise_is_dropped_and_other_warnings_kept():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_simulator_warnings()
        warnings.warn("\x1b[33mWARN: Box high's precision lowered by casting to float32, current high.dtype="
                      "float64\x1b[0m", UserWarning, stacklevel=1)
        warnings.warn("(65550) b'X11: The DISPLAY environment variable is missing'", UserWarning, stacklevel=1)
        warnings.warn("a checkpoint is older than its data", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["a checkpoint is older than its data"]


def test_making_an_ogbench_environment_prints_no_warning():
    from mqe_model.evaluation import make_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_simulator_warnings()
        make_env("scene-play-v0").close()  # its float64 bounds made gymnasium warn 8 times
    assert [str(w.message) for w in caught if issubclass(w.category, UserWarning)] == []
