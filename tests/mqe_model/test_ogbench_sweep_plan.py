"""The sweep's update budget: shared GPU rates and the plan rows."""

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqe_model.ogbench import sweep_plan


def test_shared_rate_of_the_first_sweeps_probe():
    # MQE, GCIQL, GCBC together on scene-play: 115, 390, 1580 updates/s; the runs then averaged 247-301.
    assert sweep_plan.shared_rate([115, 390, 1580]) == pytest.approx(3 / (1 / 115 + 1 / 390 + 1 / 1580))
    assert 250 < sweep_plan.shared_rate([115, 390, 1580]) < 255
    assert sweep_plan.shared_rate([375.0]) == 375.0


@given(st.lists(st.floats(1.0, 1e4), min_size=1, max_size=6))
def test_shared_rate_lies_between_the_slowest_and_k_times_it(rates):
    rate = sweep_plan.shared_rate(rates)
    assert min(rates) * (1 - 1e-9) <= rate <= len(rates) * min(rates) * (1 + 1e-9)


def test_shared_rate_refuses_nonpositive_rates():
    with pytest.raises(ValueError, match="rates must be positive"):
        sweep_plan.shared_rate([100.0, 0.0])


def test_plan_rows_and_file(tmp_path, capsys):
    rates = "mqe+gcbc/mqe=100 mqe+gcbc/gcbc=300 mqe/mqe=200"
    entries = ["scene-play-v0:0:1000:3:mqe+gcbc", "pointmaze-giant-stitch-v0:1:500:10:mqe"]
    assert sweep_plan.main([str(tmp_path), *entries, "--seeds", "4", "--preset", "ogbench_state",
                            "--rates", rates, "--safety", "0.8", "--unit", "1000"]) == 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    scene, maze = plan["rows"]
    assert scene["updates_per_s"] == pytest.approx(150.0)  # 2 / (1/100 + 1/300)
    assert scene["steps"] == 120_000 and scene["eval_every"] == 12_000 and scene["eval_start"] == 96_000
    assert maze["steps"] == 80_000 and maze["eval_start"] == 8_000 and maze["agents"] == ["mqe"]
    assert capsys.readouterr().out.splitlines() == [
        "scene-play-v0 0 mqe+gcbc 120000 12000 96000", "pointmaze-giant-stitch-v0 1 mqe 80000 8000 8000"]


def test_fixed_steps_plan_without_probes(tmp_path, capsys):
    entries = ["scene-play-v0:0:1000:3:mqe", "scene-play-v0:1:1000:3:gciql+gcbc"]
    assert sweep_plan.main([str(tmp_path), *entries, "--seeds", "4", "--preset", "ogbench_state",
                            "--steps", "150000"]) == 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["fixed_steps"] == 150_000 and plan["probe_updates_per_s"] == {}
    assert [row["updates_per_s"] for row in plan["rows"]] == [None, None]
    assert capsys.readouterr().out.splitlines() == [
        "scene-play-v0 0 mqe 150000 15000 120000", "scene-play-v0 1 gciql+gcbc 150000 15000 120000"]


@pytest.mark.parametrize("budget", [["--steps", "5"], [], ["--steps", "100", "--rates", "mqe/mqe=1"]])
def test_plan_needs_one_budget(tmp_path, budget, capsys):
    with pytest.raises(SystemExit) as exit_:
        sweep_plan.main([str(tmp_path), "scene-play-v0:0:10:3:mqe", "--seeds", "1", "--preset", "tiny", *budget])
    assert exit_.value.code == 2 and not (tmp_path / "plan.json").exists()
    assert "--steps" in capsys.readouterr().err


GB = 1 << 30


@pytest.mark.parametrize("cores, runs, memory, workers", [
    (64, 6, 512 * GB, 58),  # a 4 x H200 machine: every core the 6 training processes leave
    (16, 3, 128 * GB, 13),
    (64, 6, 120 * GB, 20),  # memory binds: 1 GB a worker, across all runs
    (2, 1, 8 * GB, 2),  # at least 2
    (4, 3, 64 * GB, 2),
])
def test_evaluation_workers(cores, runs, memory, workers):
    assert sweep_plan.evaluation_workers(cores, runs, memory) == workers


def test_evaluation_workers_reads_the_free_memory():
    free = sweep_plan.available_memory()
    assert 0 < free <= os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    # with cores to spare, memory sets the count (allow for memory moving between the two reads)
    assert abs(sweep_plan.evaluation_workers(1 << 20, 1) - max(2, free // GB)) <= 1
