"""benchmarks.dispatch_args on the CPU: the weight arrays of each arrangement, and the timed calls."""

from __future__ import annotations

import re

from benchmarks import dispatch_args

TINY = ["--preset", "tiny", "--image-size", "16", "--set", "encoder=resnet_tiny", "--calls", "5"]


def test_counts_every_arrangements_weight_arrays_and_times_each_argument_count(capsys):
    assert dispatch_args.main([*TINY, "--counts", "1", "20"]) == 0
    out = capsys.readouterr().out
    arrays = {name: int(n) for name, n in re.findall(r"^(\w+): (\d+) weight arrays", out, re.M)}
    assert set(arrays) == {"separate", "stacked", "twin"}
    # merging the two encoders turns each of their pairs of arrays into one
    assert arrays["stacked"] == arrays["twin"] < arrays["separate"]
    calls = re.findall(r"^(\d+) array arguments: ([\d.]+) us a call \(([\d.]+)x the first\)", out, re.M)
    assert [int(c) for c, *_ in calls] == [1, 20] and float(calls[0][2]) == 1.0


def test_bad_counts_are_one_line_and_exit_2(capsys):
    assert dispatch_args.main([*TINY, "--counts", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dispatch_args: error: --counts must be >= 1") and "\n" not in err
