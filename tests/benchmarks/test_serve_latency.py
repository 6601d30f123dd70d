"""benchmarks.serve_latency on the CPU: a real mqe-serve on loopback, one robot, the bundled demo policy."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import serve_latency

DEMO = Path(__file__).resolve().parents[2] / "mqe_model" / "demo" / "checkpoint"


def test_one_robot_through_a_real_server_reports_every_figure_with_the_served_encoders_and_convolutions(
        capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")  # restored after: the benchmark sets its own
    args = ["--checkpoint", str(DEMO), "--robots", "1", "--seconds", "1.5", "--warmup-s", "0.5", "--hz", "10",
            "--buckets", "1", "--bare-runs", "5", "--compilation-cache", str(tmp_path / "cache")]
    assert serve_latency.main(args) == 0
    out = capsys.readouterr().out
    # the bare act ran as the server does on the CPU, with the server's XLA flags
    assert ("image 64x64, encoders separate, convolutions xla "
            "(XLA_FLAGS --xla_backend_optimization_level=0 --xla_gpu_graph_min_graph_size=1)") in out
    ok, errors = map(int, re.search(r"requests: (\d+) ok, (\d+) errors", out).groups())
    # 1.5 s at 10 Hz: never more than the pace allows, and fewer only if the driver process starts late
    assert errors == 0 and 5 <= ok <= 16
    p50, p90, p99, worst = map(float, re.search(
        r"round trip ms: p50 ([\d.]+)\s+p90 ([\d.]+)\s+p99 ([\d.]+)\s+max ([\d.]+)", out).groups())
    assert 0 < p50 <= p90 <= p99 <= worst
    infer = float(re.search(r"server infer ms: p50 ([\d.]+)", out).group(1))
    total = float(re.search(r"server server total ms: p50 ([\d.]+)", out).group(1))
    assert 0 < infer <= total < p50  # the round trip holds the server's time, which holds the model's
    assert float(re.search(r"mean batch size: ([\d.]+)", out).group(1)) == 1.0  # one robot: never batched
    bare = float(re.search(r"bare PolicyRuntime.act \(batch 1, in-process\): ([\d.]+) ms", out).group(1))
    ratio = float(re.search(r"ratio p50 round trip / bare act: ([\d.]+)", out).group(1))
    assert ratio == pytest.approx(p50 / bare, rel=0.02, abs=0.002)


@pytest.mark.parametrize("args", [["--robots", "0"], ["--seconds", "0"], ["--hz", "-5"], ["--bare-runs", "0"]])
def test_bad_arguments_are_one_line_and_exit_2_before_any_server_starts(capsys, args):
    assert serve_latency.main(["--checkpoint", str(DEMO), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("serve_latency: error: --robots and --bare-runs must be >= 1") and "\n" not in err
