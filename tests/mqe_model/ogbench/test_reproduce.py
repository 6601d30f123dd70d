"""mqe-ogbench train: the paper's alpha table, OGBench scoring, and a tiny end-to-end row."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import pytest

from mqe_model.agents import gciql, mqe
from mqe_model.agents.configs import apply_overrides
from mqe_model.ogbench import cli, gpus, reproduce

pytest.importorskip("ogbench", reason="the reproduction needs `pip install ogbench` (and MuJoCo)")


def main(args: list[str]) -> int:
    """`mqe-ogbench train ARGS`; its exit code."""
    return cli.main(["train", *args])


@pytest.mark.parametrize(("dataset", "alpha"), [
    ("pointmaze-giant-stitch-v0", 0.03), ("pointmaze-medium-navigate", 0.03),
    ("scene-play-v0", 1.0), ("puzzle-4x4-play-v0", 1.0), ("cube-double-play-v0", 1.0),
    ("visual-scene-play-v0", 3.0), ("cube-triple-noisy-v0", 0.1), ("visual-cube-double-noisy-v0", 0.1),
    ("antmaze-large-explore-v0", 0.003), ("humanoidmaze-giant-stitch-v0", 0.01),
    ("visual-antmaze-giant-stitch-v0", 0.3),
])
def test_paper_alpha(dataset, alpha):
    assert reproduce.paper_alpha(dataset) == alpha


def test_protocol_overrides_follow_ogbench():
    assert reproduce.protocol_overrides("mqe", "pointmaze-giant-navigate-v0") == ["alpha=0.03"]
    assert reproduce.protocol_overrides("mqe", "pointmaze-giant-stitch-v0") == [
        "alpha=0.03", "actor_p_random_goal=0.5"]
    ddpgbc = ["batch_size=1024", "actor_loss=ddpgbc"]
    assert reproduce.protocol_overrides("gciql", "antmaze-large-stitch") == [
        *ddpgbc, "alpha=0.3", "actor_layer_norm=false", "actor_p_random_goal=0.5"]
    assert reproduce.protocol_overrides("gcbc", "pointmaze-giant-stitch-v0") == ["batch_size=1024", "layer_norm=false"]
    assert reproduce.protocol_overrides("gciql", "scene-play-v0") == [*ddpgbc, "alpha=1.0", "actor_layer_norm=false"]
    assert reproduce.protocol_overrides("gciql", "pointmaze-giant-navigate-v0") == [
        *ddpgbc, "alpha=0.003", "actor_layer_norm=false", "gamma=0.995"]
    assert reproduce.protocol_overrides("gcbc", "visual-scene-play-v0") == ["layer_norm=false"]  # OGBench: 256 on pixels
    assert reproduce.ogbench_gciql_alpha("puzzle-4x4-noisy-v0") == 0.03
    config = apply_overrides(gciql.get_config("ogbench_state"),
                             tuple(reproduce.protocol_overrides("gciql", "pointmaze-giant-stitch-v0")))
    assert (config.batch_size, config.actor_loss, config.alpha, config.gamma) == (1024, "ddpgbc", 0.003, 0.995)
    assert not config.actor_layer_norm and config.layer_norm  # OGBench: LayerNorm in V and Q, none in the actor
    with pytest.raises(reproduce.ReproduceError, match="no OGBench GCIQL alpha"):
        reproduce.protocol_overrides("gciql", "visual-scene-play-v0")
    cfg = reproduce.ReproduceConfig("pointmaze-giant-stitch-v0", set=("actor_p_random_goal=0.2",))
    command = reproduce.train_command(cfg, "pointmaze-giant-stitch-v0", Path("d.npz"), 0, Path("w"))
    overrides = command[command.index("--set") + 1:]  # --set comes last but for --no-progress
    assert overrides[:3] == ["alpha=0.03", "actor_p_random_goal=0.5", "actor_p_random_goal=0.2"]
    config = apply_overrides(mqe.get_config("ogbench_state"), tuple(overrides[:3]))
    assert config.actor_p_random_goal == 0.2 and config.alpha == 0.03  # the user's --set wins


def test_score_is_mean_of_last_three_evaluations():
    rows = [{"step": s, "eval/success": v} for s, v in ((1, 0.0), (2, 0.2), (3, 0.4), (4, 0.6))]
    assert reproduce.seed_score(rows) == pytest.approx(0.4)
    assert reproduce.seed_score(rows[:1]) == 0.0


def test_checkpoints_land_on_every_evaluation():
    assert reproduce.checkpoint_interval(100_000) == 50_000
    assert reproduce.checkpoint_interval(10) == 10 and reproduce.checkpoint_interval(30_000) == 30_000


def test_tiny_reproduction_writes_its_row(tmp_path):
    official = ["pointmaze-medium-navigate", "--preset", "tiny", "--steps", "20", "--eval-every", "10",
                "--eval-episodes", "1", "--eval-workers", "2", "--data-dir", str(tmp_path / "data"), "--runs-dir", str(tmp_path / "runs"),
                "--no-progress"]
    assert main([*official, "--data-episodes", "3", "--data-length", "50"]) == 0
    out = tmp_path / "runs" / "pointmaze-medium-navigate-v0" / "mqe"
    row = json.loads(out.with_suffix(".json").read_text())
    assert row["alpha"] == 0.03 and row["steps"] == 20 and row["seeds"] == [0]
    assert 0.0 <= row["success_mean"] <= 100.0 and row["success_sem"] is None
    (run,) = row["runs"]
    assert [e["step"] for e in run["evaluations"]] == [10, 20] and "--set alpha=0.03" in run["command"]
    assert "mqe-ogbench data pointmaze-medium-navigate-v0" in row["data"]["generated_by"]
    assert row["data"]["settings"]["mujoco_version"]
    header, rule, line = out.with_suffix(".md").read_text().splitlines()
    assert line.startswith("| pointmaze-medium-navigate-v0 | mqe |") and line.endswith("| — |")
    assert header.count("|") == rule.count("|") == line.count("|")
    # A row trained beyond the protocol names what it changed.
    assert reproduce.markdown_row({**row, "overrides": ["lam=0.99", "zeta=0.5"]}).endswith("| lam=0.99 zeta=0.5 |")
    # The tiny file must not be taken for the official-size dataset.
    assert main(official) == 2


def test_unknown_dataset_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["pointmaze-tiny-navigate", "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mqe-ogbench train: error:") and "\n" not in err
    assert main(["scene-play", "--data", str(tmp_path / "missing.npz")]) == 2


def test_repeated_seeds_are_refused():
    with pytest.raises(SystemExit) as exit_info:
        main(["scene-play", "--seeds", "0", "0"])
    assert exit_info.value.code == 2


def test_vmapped_seeds_are_one_run_scored_seed_by_seed(tmp_path):
    args = ["pointmaze-medium-navigate", "--preset", "tiny", "--steps", "10", "--eval-every", "10",
            "--eval-episodes", "1", "--eval-workers", "2", "--data-dir", str(tmp_path / "data"),
            "--runs-dir", str(tmp_path / "runs"), "--no-progress", "--data-episodes", "3", "--data-length", "50",
            "--agent", "gcbc", "--seeds", "3", "4", "--vmap-seeds"]
    assert main(args) == 0
    row = json.loads((tmp_path / "runs" / "pointmaze-medium-navigate-v0" / "gcbc.json").read_text())
    assert row["seeds"] == [3, 4] and row["vmap_seeds"] and [r["seed"] for r in row["runs"]] == [3, 4]
    assert {r["workdir"] for r in row["runs"]} == {str(tmp_path / "runs" / "pointmaze-medium-navigate-v0" / "gcbc" / "seeds3-4")}
    assert all("--num-seeds 2" in r["command"] and "--seed 3" in r["command"] for r in row["runs"])
    assert all(len(r["evaluations"]) == 1 and 0 <= r["score"] <= 1 for r in row["runs"])
    assert row["success_mean"] == pytest.approx(100 * (row["runs"][0]["score"] + row["runs"][1]["score"]) / 2)


def test_vmapped_seeds_must_be_consecutive():
    with pytest.raises(SystemExit) as exit_info:
        main(["scene-play", "--seeds", "0", "2", "--vmap-seeds"])
    assert exit_info.value.code == 2


def test_eval_start_beyond_the_run_is_refused():
    with pytest.raises(SystemExit) as exit_info:
        main(["scene-play", "--steps", "100", "--eval-start", "200"])
    assert exit_info.value.code == 2


@pytest.mark.parametrize("seeds", [[3], [0, 1, 2, 3], [4, 5]])
def test_run_names_give_back_their_seeds(seeds):
    assert reproduce.run_seeds(reproduce.run_name(seeds)) == seeds


@pytest.mark.parametrize(("seeds", "vmap", "gpus", "groups"), [
    ([0, 1, 2, 3], False, 4, [[0], [1], [2], [3]]),
    ([0, 1, 2, 3], True, 0, [[0, 1, 2, 3]]),
    ([0, 1, 2, 3, 4, 5, 6, 7], True, 4, [[0, 1], [2, 3], [4, 5], [6, 7]]),
    ([0, 1, 2, 3, 4], True, 2, [[0, 1, 2], [3, 4]]),
    ([5, 6], True, 4, [[5], [6]]),
])
def test_seed_groups(seeds, vmap, gpus, groups):
    assert reproduce.seed_groups(seeds, vmap, gpus) == groups


def test_gpus_run_groups_at_once_one_per_gpu(monkeypatch):
    import threading

    lock, busy, peak, seen = threading.Lock(), set(), [0], []

    def fake_train_run(cfg, dataset, data, seeds, gpu=None, on_trained=None):
        with lock:
            assert gpu not in busy, "two runs on one GPU"
            busy.add(gpu)
            peak[0] = max(peak[0], len(busy))
            seen.append((seeds[0], gpu))
        time.sleep(0.05)
        with lock:
            busy.remove(gpu)
        if seeds == [4]:
            raise reproduce.ReproduceError("seed4: mqe-train exited with 1")
        return [{"seed": seeds[0]}]

    monkeypatch.setattr(reproduce, "train_run", fake_train_run)
    cfg = reproduce.ReproduceConfig("scene-play", seeds=(0, 1, 2, 3, 4), gpus=("2", "5"))
    with pytest.raises(reproduce.ReproduceError, match="seed4"):  # reported once every run has ended
        reproduce.train_groups(cfg, "scene-play-v0", Path("d.npz"), [[s] for s in cfg.seeds])
    assert sorted(s for s, _ in seen) == [0, 1, 2, 3, 4] and {g for _, g in seen} == {"2", "5"}
    assert peak[0] == 2
    cfg = dataclasses.replace(cfg, seeds=(0, 1, 2))
    assert reproduce.train_groups(cfg, "scene-play-v0", Path("d.npz"), [[0], [1], [2]]) == [
        [{"seed": 0}], [{"seed": 1}], [{"seed": 2}]]


def test_runs_per_gpu_share_each_gpu_up_to_n_at_once(monkeypatch):
    import threading

    lock, busy, peak = threading.Lock(), {}, {}

    def fake_train_run(cfg, dataset, data, seeds, gpu=None, on_trained=None):
        with lock:
            busy[gpu] = busy.get(gpu, 0) + 1
            peak[gpu] = max(peak.get(gpu, 0), busy[gpu])
        time.sleep(0.1)
        with lock:
            busy[gpu] -= 1
        return [{"seed": seeds[0]}]

    monkeypatch.setattr(reproduce, "train_run", fake_train_run)
    cfg = reproduce.ReproduceConfig("scene-play", seeds=tuple(range(7)), gpus=("0", "3"), runs_per_gpu=3)
    assert cfg.gpu_slots == ("0", "0", "0", "3", "3", "3")
    assert reproduce.seed_groups(list(cfg.seeds), True, len(cfg.gpu_slots)) == [[0, 1], [2], [3], [4], [5], [6]]
    runs = reproduce.train_groups(cfg, "scene-play-v0", Path("d.npz"), [[s] for s in cfg.seeds])
    assert [r[0]["seed"] for r in runs] == list(range(7))
    assert peak == {"0": 3, "3": 3}


HANDOFF_RUN = """
import json, pathlib, sys, time
workdir = pathlib.Path(sys.argv[sys.argv.index("--workdir") + 1]); steps = int(sys.argv[sys.argv.index("--steps") + 1])
workdir.mkdir(parents=True, exist_ok=True)
handed_off = workdir.parent / "handed-off"
if {handoff}:
    (workdir / "trained.json").write_text(json.dumps({{"step": steps}}))
    deadline = time.time() + 20  # the run 'evaluates' until the scheduler has taken the GPU back
    while not handed_off.exists():
        if time.time() > deadline:
            sys.exit(3)
        time.sleep(0.05)
(workdir / "metrics.jsonl").write_text(json.dumps({{"step": steps, "eval/success": 0.5}}) + "\\n")
"""


@pytest.mark.parametrize("handoff", [True, False])
def test_a_run_hands_its_gpu_on_when_its_updates_end(tmp_path, monkeypatch, handoff):
    monkeypatch.setattr(gpus, "HANDOFF_POLL_S", 0.05)
    monkeypatch.setattr(reproduce, "train_command", lambda cfg, dataset, data, seed, workdir, n=1: [
        sys.executable, "-c", HANDOFF_RUN.format(handoff=handoff), "--workdir", str(workdir), "--steps", str(cfg.steps)])
    cfg = reproduce.ReproduceConfig("scene-play", steps=10, runs_dir=tmp_path, gpus=("0",), handoff=handoff)
    workdir = tmp_path / "scene-play-v0" / "mqe" / "seed0"
    workdir.mkdir(parents=True)
    (workdir / "trained.json").write_text("{}")  # an earlier invocation's, not this run's
    calls = []

    def on_trained():
        calls.append(workdir.joinpath("metrics.jsonl").exists())
        (workdir.parent / "handed-off").touch()

    runs = reproduce.train_run(cfg, "scene-play-v0", Path("d.npz"), [0], "0", on_trained)
    assert [run["score"] for run in runs] == [0.5]
    assert calls == ([False] if handoff else [])  # called once, before the run had finished


@pytest.mark.parametrize("args", [["--runs-per-gpu", "2"], ["--gpus", "0", "--runs-per-gpu", "0"]])
def test_runs_per_gpu_needs_gpus_and_a_positive_count(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["scene-play", *args])
    assert exit_info.value.code == 2
    assert "--runs-per-gpu" in capsys.readouterr().err


@pytest.mark.parametrize("gpus", [["0", "0"], ["cuda:0"]])
def test_bad_gpu_lists_are_refused(gpus):
    with pytest.raises(SystemExit) as exit_info:
        main(["scene-play", "--gpus", *gpus])
    assert exit_info.value.code == 2


def test_runs_on_gpus_write_one_row_and_a_log_each(tmp_path):
    args = ["pointmaze-medium-navigate", "--preset", "tiny", "--steps", "10", "--eval-every", "10",
            "--eval-episodes", "1", "--eval-workers", "1", "--data-dir", str(tmp_path / "data"),
            "--runs-dir", str(tmp_path / "runs"), "--no-progress", "--data-episodes", "3", "--data-length", "50",
            "--agent", "gcbc", "--seeds", "0", "1", "--gpus", "0", "1"]
    assert main(args) == 0
    out = tmp_path / "runs" / "pointmaze-medium-navigate-v0" / "gcbc"
    row = json.loads(out.with_suffix(".json").read_text())
    assert row["seeds"] == [0, 1] and row["gpus"] == ["0", "1"] and [r["seed"] for r in row["runs"]] == [0, 1]
    assert "runs on 2 GPUs at once" in out.with_suffix(".md").read_text()
    for seed in (0, 1):  # each run's output went to its own log, not to the terminal
        assert "step" in (out / f"seed{seed}.log").read_text()
        assert json.loads((out / f"seed{seed}" / "trained.json").read_text()) == {"step": 10}


@pytest.mark.parametrize(("steps", "eval_every", "eval_start", "save_every", "keep"), [
    (1_000_000, 100_000, 0, 50_000, 5),  # 800k, 850k, 900k, 950k, 1M
    (1_000_000, 100_000, 900_000, 50_000, 3),  # only 900k and 1M are evaluated
    (20, 10, 0, 10, 3),  # 10 and 20
    (95_000, 10_000, 0, 5_000, 4),  # scored 80k, 90k, 95k (the last step); saves 80k, 85k, 90k, 95k
    (95_000, 10_000, 0, 10_000, 3),  # saves 80k, 90k, 95k
    (400, 100, 0, 100, 3),
])
def test_checkpoints_of_the_scored_evaluations_are_kept(steps, eval_every, eval_start, save_every, keep):
    assert reproduce.checkpoints_to_keep(steps, eval_every, eval_start, save_every) == keep
    command = reproduce.train_command(reproduce.ReproduceConfig("scene-play", steps=1_000_000),
                                      "scene-play-v0", Path("d.npz"), 0, Path("w"))
    assert command[command.index("--keep") + 1] == "5"
