"""max_pool benchmark: both implementations timed in one run, the ratio consistent with the times."""

from __future__ import annotations

import re

from benchmarks import max_pool


def test_reports_both_times_and_their_ratio(capsys):
    max_pool.main(max_pool.PoolBenchConfig(images=8, size=32, channels=(4, 8), iters=2))
    out = capsys.readouterr().out
    assert "8 images, bfloat16" in out
    flax_ms = float(re.search(r"flax max_pool forward\+backward: ([\d.]+) ms", out).group(1))
    ours_ms, ratio = map(float, re.search(
        r"encoders' max_pool forward\+backward: ([\d.]+) ms \(([\d.]+)x flax's speed\)", out).groups())
    assert flax_ms > 0 and ours_ms > 0
    assert abs(ratio - flax_ms / ours_ms) <= 0.03 * ratio + 0.01  # both times printed to 3 decimals
