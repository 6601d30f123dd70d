"""The GPU's clocks between consecutive benchmark lines (clocks6.sh's summary).

    python3 docs/results/lease/clock_windows.py CLOCKS_CSV STAMPED_OUTPUT...

CLOCKS_CSV is `nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,power.draw,utilization.gpu
--format=csv -lms 10`; each STAMPED_OUTPUT line starts with the time of day it was printed (HH:MM:SS.mmm).
For each line, prints the samples taken since the line before it: their count, the median SM and memory
clock, power and utilization, and the performance states seen, so a phase's clocks read beside its figure.
"""

from __future__ import annotations

import csv
import statistics
import sys
from datetime import datetime


def seconds_of_day(text: str) -> float:
    clock = datetime.strptime(text.strip()[-12:], "%H:%M:%S.%f")
    return clock.hour * 3600 + clock.minute * 60 + clock.second + clock.microsecond / 1e6


def number(field: str) -> float:
    return float(field.split()[0])


def main(clocks_csv: str, outputs: list[str]) -> None:
    with open(clocks_csv, newline="") as f:
        rows = [row for row in csv.reader(f, skipinitialspace=True) if row and row[0] != "timestamp"]
    samples = []
    for row in rows:
        try:
            samples.append((seconds_of_day(row[0]), row[1], *(number(x) for x in row[2:6])))
        except (ValueError, IndexError):
            continue  # a cut last line, or a field nvidia-smi could not read ("[N/A]")
    for output in outputs:
        print(f"== {output}")
        previous = None
        with open(output) as f:
            lines = f.readlines()
        for line in lines:
            stamp, _, text = line.partition(" ")
            try:
                now = seconds_of_day(stamp)
            except ValueError:
                continue
            if previous is not None:
                window = [s for s in samples if previous < s[0] <= now]
                if window:
                    sm, mem, power, util = (statistics.median(s[i] for s in window) for i in range(2, 6))
                    states = "/".join(sorted({s[1] for s in window}))
                    print(f"{len(window):5d} samples  SM {sm:6.0f} MHz  mem {mem:5.0f} MHz  {power:6.1f} W  "
                          f"util {util:3.0f} %  {states:7s} | {text.strip()[:90]}")
            previous = now


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
