"""mqe-ogbench eval: the trainer's evaluation of a saved checkpoint, sampled actions and the one-line
errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mqe_model import train
from mqe_model.metrics import read_evaluations
from mqe_model.ogbench import cli

pytest.importorskip("ogbench", reason="the evaluation needs `pip install ogbench` (and MuJoCo)")


ENV = "pointmaze-medium-navigate-v0"


def write_xy_npz(path: Path, episodes: int = 6, length: int = 30) -> Path:
    """Random walks in 2-D xy (pointmaze's observation), 2-D actions."""
    rng = np.random.default_rng(0)
    n = episodes * length
    terminals = np.zeros(n, np.float32)
    terminals[length - 1 :: length] = 1.0
    np.savez(path, observations=np.cumsum(rng.normal(size=(n, 2)), axis=0).astype(np.float32),
             actions=rng.uniform(-1, 1, size=(n, 2)).astype(np.float32), terminals=terminals)
    return path


def main(args: list[str]) -> int:
    """`mqe-ogbench eval ARGS`; its exit code."""
    return cli.main(["eval", *args])


def evaluated_run(root: Path, agent: str) -> Path:
    """A 10-update tiny run on pointmaze-shaped data that evaluated itself (1 episode per task)."""
    workdir = root / agent
    args = ["--agent", agent, "--preset", "tiny", "--data", str(write_xy_npz(root / "xy.npz")),
            "--workdir", str(workdir), "--steps", "10", "--updates-per-dispatch", "10", "--log-every", "10",
            "--save-every", "10", "--no-progress", "--data-workers", "1", "--eval-env", ENV,
            "--eval-episodes", "1", "--eval-workers", "1"]
    assert train.main(args) == 0
    return workdir


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("evaluate")
    return {agent: evaluated_run(root, agent) for agent in ("mqe",)}


def test_a_saved_checkpoint_scores_as_the_trainer_scored_it(runs, tmp_path, capsys):
    step_dir = tmp_path / "10"  # params and metadata only, as a checkpoint brought back from a GPU machine
    shutil.copytree(runs["mqe"] / "checkpoints" / "10", step_dir)
    shutil.rmtree(step_dir / "train_state")
    out = tmp_path / "report.json"
    assert main([str(step_dir), "--episodes", "1", "--workers", "1", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    trainer = read_evaluations(runs["mqe"])[-1]
    (entry,) = report["checkpoints"]
    assert report["env"] == ENV and entry["step"] == trainer["step"] == 10  # --env from the run
    assert entry["success"] == pytest.approx(100 * trainer["eval/success"])
    assert entry["tasks"] == pytest.approx([100 * trainer[f"eval/task{i}_success"] for i in range(1, 6)])
    assert entry["length"] == pytest.approx(trainer["eval/length"])
    ends = {k: v for k, v in entry.items() if k.startswith("end_distance_")}
    assert ends and all(v >= 0 for v in ends.values())  # MQE answers its critic's distance
    assert ends == pytest.approx({k.removeprefix("eval/"): v for k, v in trainer.items() if "end_distance" in k})
    assert report["success_mean"] == entry["success"] and report["policy"].startswith("actor")
    assert "mean over 1 checkpoint(s)" in capsys.readouterr().out


def test_several_paths_to_one_checkpoint_score_alike(runs, tmp_path):
    out = tmp_path / "twice.json"
    assert main([str(runs["mqe"]), str(runs["mqe"] / "checkpoints"), "--episodes", "1", "--workers", "1",
                 "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [c["step"] for c in report["checkpoints"]] == [10, 10]
    assert report["checkpoints"][0]["tasks"] == report["checkpoints"][1]["tasks"]  # same episodes, same policy
    assert report["command"].startswith("mqe-ogbench eval ")


def test_sampled_actions_are_reported_and_differ_from_the_mean(runs, tmp_path):
    mean_out, sampled_out = tmp_path / "mean.json", tmp_path / "sampled.json"
    for out, extra in ((mean_out, []), (sampled_out, ["--temperature", "1.0"])):
        assert main([str(runs["mqe"]), "--episodes", "1", "--workers", "1", "--out", str(out), *extra]) == 0
    mean, sampled = json.loads(mean_out.read_text()), json.loads(sampled_out.read_text())
    assert "sampled at temperature 1" in sampled["policy"] and "not OGBench's protocol" in sampled["policy"]
    assert mean["policy"].startswith("actor (OGBench protocol")
    ends = [{k: v for k, v in report["checkpoints"][0].items() if k.startswith("end_distance_")}
            for report in (mean, sampled)]
    assert ends[0] and ends[1] and ends[0] != pytest.approx(ends[1])  # other episodes: the critic's last reading moved
    assert "--temperature 1.0" in sampled["command"]


@pytest.mark.parametrize("case, message", [
    ("negative-temperature", "--temperature -0.5: 0 (the policy's mean) or > 0"),
    ("missing", "no such directory"),
    ("wrong-env", "wrong --env?"),
    ("no-episodes", "must be >= 1"),
])
def test_bad_input_is_one_line_and_exit_2(runs, tmp_path, capsys, case, message):
    mqe_run = str(runs["mqe"])
    args = {"missing": [str(tmp_path / "nothing")],
            "wrong-env": [mqe_run, "--env", "scene-play-v0"],
            "no-episodes": [mqe_run, "--episodes", "0"],
            "negative-temperature": [mqe_run, "--temperature", "-0.5"]}[case]
    out = tmp_path / "report.json"
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mqe-ogbench eval: error:") and message in err and "\n" not in err
    assert not out.exists()
