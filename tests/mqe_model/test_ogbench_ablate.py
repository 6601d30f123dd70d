"""mqe-ogbench-ablate: variants parsed and checked up front, trained side by side, compared in one table."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from mqe_model.ogbench import ablate, reproduce

pytest.importorskip("ogbench", reason="the ablation runs mqe-ogbench-repro's pipeline (`pip install ogbench`)")


def test_tiny_ablation_trains_each_variant_and_compares_them(tmp_path):
    args = ["pointmaze-medium-navigate", "--preset", "tiny", "--steps", "10", "--eval-every", "10",
            "--eval-episodes", "1", "--eval-workers", "1", "--data-dir", str(tmp_path / "data"),
            "--runs-dir", str(tmp_path / "runs"), "--no-progress", "--data-episodes", "3", "--data-length", "50",
            "--seeds", "0", "1", "--vmap-seeds", "--gpus", "0", "1", "--set", "gamma=0.9",
            "--variants", "base=", "inv4=invariance_actions=4 zeta=0.5"]
    assert ablate.main(args) == 0
    runs = tmp_path / "runs"
    rows = {name: json.loads((runs / name / "pointmaze-medium-navigate-v0" / "mqe.json").read_text())
            for name in ("base", "inv4")}
    assert rows["base"]["overrides"] == ["gamma=0.9"]
    assert rows["inv4"]["overrides"] == ["gamma=0.9", "invariance_actions=4", "zeta=0.5"]
    for name, row in rows.items():  # each variant: one vmapped run of both seeds, in its own directory
        assert row["seeds"] == [0, 1] and {r["workdir"] for r in row["runs"]} == {
            str(runs / name / "pointmaze-medium-navigate-v0" / "mqe" / "seeds0-1")}
        assert ("invariance_actions=4" in row["runs"][0]["command"]) == (name == "inv4")
    report = json.loads((runs / "pointmaze-medium-navigate-v0-mqe-ablation.json").read_text())
    base, inv4 = report["variants"]
    assert report["baseline"] == "base" and report["common_overrides"] == ["gamma=0.9"]
    assert base["status"] == inv4["status"] == "done" and "vs_baseline" not in base
    assert inv4["vs_baseline"] == pytest.approx(rows["inv4"]["success_mean"] - rows["base"]["success_mean"])
    assert len(inv4["tasks"]) == 5 and inv4["updates_per_s"] > 0 and len(inv4["success_per_seed"]) == 2
    table = (runs / "pointmaze-medium-navigate-v0-mqe-ablation.md").read_text()
    assert "| variant | overrides | success % (mean ± s.e.) | per seed | vs base |" in table
    assert "| inv4 | invariance_actions=4 zeta=0.5 |" in table and "| base | — |" in table


@pytest.mark.parametrize(("variants", "message"), [
    (["only="], "give at least two NAME=OVERRIDES"),
    (["a=", "noequals"], "write NAME=OVERRIDES"),
    (["a=", "../up=lam=0.9"], "write NAME=OVERRIDES"),
    (["a=", "a=lam=0.9"], "names repeat"),
    (["a=", "b=no_such_field=1"], "--variants 'b=no_such_field=1'"),
    (["a=", "b=lam=2"], "--variants 'b=lam=2'"),
])
def test_bad_variants_are_one_line_before_any_work(tmp_path, capsys, variants, message):
    code = ablate.main(["scene-play", "--runs-dir", str(tmp_path / "runs"), "--variants", *variants])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("mqe-ogbench-ablate: error:") and message in err and "\n" not in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("dataset", "accepted"), [("pointmaze-giant-stitch", True),
                                                  ("pointmaze-giant-navigate", False)])
def test_variants_are_checked_with_the_datasets_protocol_settings(tmp_path, capsys, dataset, accepted):
    # BC on own-trajectory goals only needs random actor goals, which the protocol gives stitch datasets
    # alone: there the variant passes the check and the run stops later, at the missing data file.
    code = ablate.main([dataset, "--data", str(tmp_path / "missing.npz"), "--runs-dir", str(tmp_path / "runs"),
                        "--variants", "default=", "ownbc=actor_bc_on_random_goals=false"])
    err = capsys.readouterr().err
    assert code == 2
    assert ("missing.npz: no such file" in err) == accepted
    assert ("--variants 'ownbc=actor_bc_on_random_goals=false'" in err) == (not accepted)


def test_out_is_refused(tmp_path, capsys):
    assert ablate.main(["scene-play", "--out", str(tmp_path / "row"), "--variants", "a=", "b="]) == 2
    assert "an ablation writes one per variant" in capsys.readouterr().err


def test_a_failing_variant_leaves_the_others_and_the_table(tmp_path, monkeypatch):
    lock, busy, peak = threading.Lock(), set(), [0]
    scores = {"base": 0.25, "bad": 0.0, "better": 0.5}

    def fake_train_run(cfg, dataset, data, seeds, gpu=None, on_trained=None):
        with lock:
            assert gpu not in busy, "two runs on one GPU"
            busy.add(gpu)
            peak[0] = max(peak[0], len(busy))
        time.sleep(0.3 if seeds == [0] else 0.05)  # seed 0 ends last; the rows still list the seeds in order
        with lock:
            busy.remove(gpu)
        name = cfg.runs_dir.name
        if name == "bad":
            raise reproduce.ReproduceError("seed0: mqe-train exited with 1")
        return [{"seed": s, "score": scores[name] + 0.1 * s, "seconds": 60.0, "workdir": str(tmp_path / name)}
                for s in seeds]

    monkeypatch.setattr(reproduce, "train_run", fake_train_run)
    monkeypatch.setattr(reproduce, "prepare", lambda cfg: ("scene-play-v0", tmp_path / "d.npz", None))
    cfg = ablate.AblateConfig("scene-play", seeds=(0, 1), gpus=("3", "7"), runs_dir=tmp_path / "runs",
                              variants=("base=", "bad=lam=0.9", "better=lam=0.99"))
    failures = ablate.ablate(cfg)
    assert list(failures) == ["bad"] and "exited with 1" in failures["bad"] and peak[0] == 2
    report = json.loads((tmp_path / "runs" / "scene-play-v0-mqe-ablation.json").read_text())
    base, bad, better = report["variants"]
    assert [e["status"] for e in report["variants"]] == ["done", "failed", "done"]
    assert base["success_per_seed"] == pytest.approx([25.0, 35.0]) and base["success_sem"] == pytest.approx(5.0)
    assert better["vs_baseline"] == pytest.approx(25.0) and better["vs_baseline_sem"] == pytest.approx(50 ** 0.5)
    assert better["tasks"] == [] and better["updates_per_s"] is None and better["minutes_per_run"] == 1.0
    assert "exited with 1" in bad["error"]
    assert (tmp_path / "runs" / "better" / "scene-play-v0" / "mqe.json").is_file()
    assert not (tmp_path / "runs" / "bad" / "scene-play-v0" / "mqe.json").exists()
    assert "| bad | lam=0.9 | failed |" in (tmp_path / "runs" / "scene-play-v0-mqe-ablation.md").read_text()


def test_variant_configs_add_their_overrides_after_the_common_ones(tmp_path):
    cfg = ablate.AblateConfig("scene-play", set=("alpha=0.5",), runs_dir=tmp_path, variants=("a=", "b=lam=0.9"))
    variant = ablate.parse_variants(cfg.variants, "mqe", "ogbench_state", cfg.set)[1]
    repro = cfg.for_variant(variant)
    assert type(repro) is reproduce.ReproduceConfig
    assert repro.set == ("alpha=0.5", "lam=0.9") and repro.runs_dir == tmp_path / "b" and repro.out is None
    command = reproduce.train_command(repro, "scene-play-v0", Path("d.npz"), 0, Path("w"))
    assert command[command.index("--set") + 1:][:3] == ["alpha=1.0", "alpha=0.5", "lam=0.9"]
