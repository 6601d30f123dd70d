"""benchmarks.xla_flags on the CPU: one process per setting, ratios to the first, refused flags reported."""

from __future__ import annotations

import json
import os

import pytest

from benchmarks import train_step, xla_flags

ACT_ARGS = "--preset tiny --image-size 0 --runs 5 --paced-runs 2 --hz 50 --profile-calls 0"


def test_settings_run_apart_and_compare_to_the_first(capsys):
    code = xla_flags.main(["--target", "act_latency", f"--target-args={ACT_ARGS}",
                           "--variant", "base=", "--variant", "one thread=--xla_cpu_multi_thread_eigen=false",
                           "--variant", "bogus=--xla_no_such_flag_anywhere=1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "\nseparate: act back to back ms\n" in out
    assert "  base" in out and "1.00x" in out  # the baseline against itself
    one_thread = [line for line in out.splitlines() if line.startswith("  one thread ")]  # the table, not progress
    assert len(one_thread) == 3 and all(line.endswith("x") for line in one_thread)  # 3 figures, each a ratio
    assert "setting 'bogus'" in out and "no figures (exit" in out  # XLA refused the unknown flag
    # Each setting's figures were printed as it finished, before the comparison at the end.
    progress = out[:out.index("setting 'base'")]
    assert "  base: separate: act back to back ms = " in progress and "(1.00x)" in progress
    assert progress.index("  one thread: ") < progress.index("running benchmarks.act_latency with 'bogus'")


def test_train_throughput_under_settings_that_give_it_two_devices(capsys):
    """The data-parallel target: a setting may change the device count itself (two forced CPU devices
    here); the 2-device figures and the scaling ratio come back through its --json."""
    code = xla_flags.main(["--target", "train_throughput",
                           "--target-args=--preset tiny --devices 1 2 --bare-only --updates-per-dispatch 2",
                           "--variant", "two devices=--xla_force_host_platform_device_count=2"])
    out = capsys.readouterr().out
    assert code == 0, out
    for figure in ("bare update, 1 device: steps/s", "bare update, 2 devices: steps/s",
                   "bare update, 2 devices: x vs 1 device", "bare update, 1 device, batch / 2: steps/s",
                   "2-device ceiling: x vs 1 device", "bare update, 2 devices: share of the ceiling"):
        assert f"\n{figure}\n" in out
    assert xla_flags.DEFAULT_VARIANTS["train_throughput"][0] == "default="


def test_a_target_past_its_time_reports_what_it_had_printed(tmp_path, monkeypatch):
    (tmp_path / "slow_target.py").write_text(
        "import time\nprint('bare update (1 device): 41.0 steps/s')\ntime.sleep(60)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    result = xla_flags.run_variant("slow_target", "", "", timeout_s=3)
    assert result == "no figures: still running after 3 s; its last output: bare update (1 device): 41.0 steps/s"
    assert xla_flags.output_so_far(None) == xla_flags.output_so_far(b"\n") == ""
    assert xla_flags.output_so_far("a\nb\n\nc\nd\n") == "; its last output: b | c | d"


def test_bad_variants_exit_2(capsys):
    assert xla_flags.main(["--variant", "no-equals-sign"]) == 2
    assert "expected NAME=FLAGS" in capsys.readouterr().err
    assert xla_flags.main(["--variant", "a=", "--variant", "a=--x"]) == 2
    assert "repeat" in capsys.readouterr().err


def test_a_failing_baseline_exits_1(capsys):
    assert xla_flags.main(["--target", "act_latency", f"--target-args={ACT_ARGS}",
                           "--variant", "bogus=--xla_no_such_flag_anywhere=1"]) == 1
    assert "the baseline 'bogus' gave no figures" in capsys.readouterr().err


def test_train_step_writes_its_figures(tmp_path, capsys):
    out = tmp_path / "f.json"
    train_step.main(train_step.BenchConfig(preset="tiny", obs_dim=4, action_dim=2, seeds=2, scan=2, iters=1,
                                           warmup=1, precisions=("float32",), json=out,
                                           variants=("actor_goal_pairs=sampled actor_goal_samples=4",
                                                     "flat_optimizer=true")))
    figures = json.loads(out.read_text())
    variants = ("naive f32 (baseline)", "fused float32", "actor_goal_pairs=sampled actor_goal_samples=4 float32",
                "flat_optimizer=true float32")
    assert set(figures) == {f"{variant}: {figure}{how}" for variant in variants
                            for figure in ("1 seed steps/s", "2 seeds seed-steps/s") for how in ("", ", queued")}
    assert all(v > 0 for v in figures.values())
    lines = capsys.readouterr().out.splitlines()
    for variant in variants[2:3]:  # another loss
        assert "other loss" in next(line for line in lines if line.startswith(variant))
    for variant in ("fused float32", "flat_optimizer=true float32"):  # the same loss
        assert "other loss" not in next(line for line in lines if line.startswith(variant))


def test_train_step_refuses_a_bad_loss_variant():
    with pytest.raises(SystemExit, match="--variants invariance_actions=0: invariance_actions=0: must be within"):
        train_step.main(train_step.BenchConfig(preset="tiny", variants=("invariance_actions=0",)))


@pytest.mark.parametrize("items", [("x=",), ("x=--a", "y=--b --c")])
def test_parse_variants(items):
    assert [name for name, _ in xla_flags.parse_variants(items)] == [i.split("=")[0] for i in items]
