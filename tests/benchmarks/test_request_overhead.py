"""request_overhead against a real mqe-serve process on loopback (a tiny random state policy)."""

from __future__ import annotations

import re

from benchmarks import request_overhead


def test_one_robot_at_20_hz_reports_the_overhead_and_its_parts(capsys):
    args = ["--policy", "state", "--hz", "20", "--seconds", "1.5", "--warmup", "5", "--buckets", "1"]
    assert request_overhead.main(args) == 0
    out = capsys.readouterr().out
    requests = int(re.search(r"policy state, (\d+) requests at 20 Hz, one PolicyClient on loopback\n", out).group(1))
    assert 25 <= requests <= 31
    p50, p90, p99 = map(float, re.search(r"round trip ms: p50 ([\d.]+)\s+p90 ([\d.]+)\s+p99 ([\d.]+)", out).groups())
    assert 0 < p50 <= p90 <= p99
    decode, infer, total, model = map(float, re.search(
        r"server ms, p50: decode ([\d.]+)\s+infer ([\d.]+)\s+total ([\d.]+);\s+model \(compute, mean\) ([\d.]+)",
        out).groups())
    assert 0 < model and 0 < infer <= total < p50 and 0 < decode < total
    overhead, client = map(float, re.search(r"overhead ms \(p50 round trip - model\): ([-\d.]+) = client \+ HTTP ([\d.]+)",
                                            out).groups())
    assert abs(overhead - (p50 - model)) < 0.002  # both printed to 3 decimals
    assert 0 < client < p50
