"""mqe-ogbench-distances: BFS geodesics, a tiny end-to-end report, and the one-line errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mqe_model import train
from mqe_model.ogbench import distances

pytest.importorskip("ogbench", reason="the diagnostic needs `pip install ogbench` (and MuJoCo)")

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


def tiny_run(root: Path, agent: str = "mqe", num_seeds: int = 2) -> Path:
    workdir = root / "runs" / ENV / agent / "seeds0-1"
    args = ["--agent", agent, "--preset", "tiny", "--data", str(write_xy_npz(root / "xy.npz")),
            "--workdir", str(workdir), "--steps", "10", "--updates-per-dispatch", "10", "--log-every", "10",
            "--save-every", "10", "--no-progress", "--data-workers", "1", "--num-seeds", str(num_seeds)]
    assert train.main(args) == 0
    return workdir


@pytest.fixture(scope="module")
def mqe_run(tmp_path_factory) -> Path:
    return tiny_run(tmp_path_factory.mktemp("distances"))


def test_bfs_geodesics_on_a_hand_made_maze():
    maze = np.array([[1, 1, 1, 1, 1],
                     [1, 0, 0, 0, 1],
                     [1, 1, 1, 0, 1],
                     [1, 0, 0, 0, 1],
                     [1, 0, 1, 1, 1],
                     [1, 1, 1, 0, 1]])  # (5, 3) is walled off
    free, geo = distances.geodesic_cells(maze)
    at = {tuple(c): k for k, c in enumerate(free.tolist())}
    expect = {((1, 1), (1, 1)): 0, ((1, 1), (1, 3)): 2, ((1, 1), (3, 3)): 4, ((1, 1), (3, 1)): 6,
              ((1, 1), (4, 1)): 7, ((4, 1), (2, 3)): 4, ((3, 2), (1, 2)): 4}
    for (s, g), d in expect.items():
        assert geo[at[s], at[g]] == d and geo[at[g], at[s]] == d
    assert math.isinf(geo[at[(1, 1)], at[(5, 3)]])
    assert len(free) == 9 and np.all(np.diag(geo) == 0)


def test_tiny_run_report(mqe_run, tmp_path, capsys):
    out = tmp_path / "d.json"
    assert distances.main(["--workdir", str(mqe_run), "--env", ENV, "--pairs", "300", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert {"env", "step", "num_seeds", "pairs", "distance", "per_seed", "pooled", "max_geodesic"} <= set(report)
    assert report["num_seeds"] == 2 and [s["seed"] for s in report["per_seed"]] == [0, 1]
    assert report["pairs"] == 300 and report["step"] == 10
    for part in [report["pooled"], *report["per_seed"]]:
        assert -1.0 <= part["spearman"] <= 1.0
        assert [b["cells"] for b in part["buckets"]] == ["0-2", "3-5", "6-10", "11-20", "21-40", "41+"]
    assert sum(b["n"] for b in report["per_seed"][0]["buckets"]) == 300
    assert sum(b["n"] for b in report["pooled"]["buckets"]) == 600
    printed = capsys.readouterr().out
    assert "spearman" in printed and "41+" in printed


def test_errors_are_one_line_exit_2(mqe_run, tmp_path, capsys):
    cases = [["--workdir", str(tmp_path), "--env", ENV],  # no checkpoints
             ["--workdir", str(mqe_run), "--env", "scene-play-v0"],  # not a maze
             ["--workdir", str(tiny_run(tmp_path, "gcbc", 1)), "--env", ENV]]  # not MQE
    for args in cases:
        capsys.readouterr()
        assert distances.main(args) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("mqe-ogbench-distances: error:") and "\n" not in err
