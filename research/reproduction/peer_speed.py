"""peer_speed.py TRAIN_CSV...: updates/s of public main.py runs, from their `time/epoch_time` (seconds per
update over each log interval): the mean over the rows after the first (which holds the compilation)."""
import csv
import sys

for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    if len(rows) < 2:
        print(path, "rows", len(rows))
        continue
    per = [float(r["time/epoch_time"]) for r in rows[1:]]
    total_time = float(rows[-1]["time/total_time"])
    print(path, "step", rows[-1]["step"], f"updates/s {len(per) / sum(per):.1f}",
          f"last {1 / per[-1]:.1f}", f"total_time {total_time:.0f} s")
