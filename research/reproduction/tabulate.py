"""tabulate.py DIR: the table of one reproduction run (the public MQE code beside ours on one dataset).

DIR holds what the device pipeline writes (or the same files as research/reproduction/results/ keeps them) (research/reproduction/pipeline.sh): `runs/<dataset>/mqe.json`
and `runs/<dataset>/mqe/seeds*/metrics.jsonl` (ours, mqe-ogbench train), `peer-eval/seed<S>-step<N>-task<T>.json`
(peer_eval.py) and `peer/seed<S>/OGBench/peer/*/train.csv` (the public main.py's log). Prints Markdown;
writes DIR/table.json too. Success in %, mean ± standard error over seeds (each seed: the mean of its
5 tasks), as OGBench reports it.
"""

import csv
import glob
import json
import math
import os
import re
import sys
from collections import defaultdict


def mean_sem(values):
    n = len(values)
    if n == 0:
        return None, None
    m = sum(values) / n
    if n == 1:
        return m, None
    var = sum((v - m) ** 2 for v in values) / (n - 1)
    return m, math.sqrt(var / n)


def fmt(m, s):
    if m is None:
        return "n/a"
    return f"{m:.1f} ± {s:.1f}" if s is not None else f"{m:.1f}"


def globs(root, *patterns):
    """Files of the device's layout (pipeline.sh) or of the committed one (results/)."""
    return sorted(p for pattern in patterns for p in glob.glob(os.path.join(root, pattern)))


def peer_rows(root):
    by_seed = defaultdict(dict)  # seed -> task -> (step, success)
    for path in globs(root, "peer-eval/*.json", "public/eval/*.json"):
        row = json.load(open(path))
        by_seed[row["seed"]][row["task"]] = (row["step"], 100 * row["success"], row["episodes"])
    speeds = {}
    for path in globs(root, "peer/seed*/OGBench/peer/*/train.csv", "public/seed*/train.csv"):
        seed = int(re.search(r"seed(\d+)", path).group(1))
        rows = list(csv.DictReader(open(path)))
        per = [float(r["time/epoch_time"]) for r in rows[1:]]
        speeds[seed] = {"updates_per_s": len(per) / sum(per) if per else None, "last_step": int(rows[-1]["step"]) if rows else 0,
                        "train_s": float(rows[-1]["time/total_time"]) if rows else None}
    return by_seed, speeds


def ours_rows(root):
    rows = globs(root, "runs/*/mqe.json", "ours/mqe.json")
    if not rows:
        return None
    row = json.load(open(rows[0]))
    speeds, tasks = [], defaultdict(list)
    for path in globs(root, "runs/*/mqe/seed*/metrics.jsonl", "ours/metrics.jsonl"):
        lines = [json.loads(line) for line in open(path)]
        speeds += [r["perf/steps_per_s"] for r in lines if "perf/steps_per_s" in r][-1:]
        evals = [r for r in lines if "eval/success" in r]
        if evals:
            for t in range(1, 6):
                tasks[t].append(100 * evals[-1][f"eval/task{t}_success"])
    return {"per_seed": list(row["success_per_seed"]), "steps": row["steps"], "seeds": row["seeds"],
            "updates_per_s": speeds[-1] if speeds else None, "tasks": {t: sum(v) / len(v) for t, v in tasks.items()}}


def main(root):
    by_seed, speeds = peer_rows(root)
    ours = ours_rows(root)
    out = {"public": {}, "ours": ours}
    lines = ["| code | seeds | updates | success % (mean ± s.e.) | per seed | task 1-5 (mean over seeds) | updates/s |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    if by_seed:
        seeds = sorted(by_seed)
        whole = [s for s in seeds if len(by_seed[s]) == 5]
        per_seed = [sum(v[1] for v in by_seed[s].values()) / 5 for s in whole]
        steps = sorted({v[0] for s in seeds for v in by_seed[s].values()})
        episodes = sorted({v[2] for s in seeds for v in by_seed[s].values()})
        task_means = {t: sum(by_seed[s][t][1] for s in whole) / len(whole) for t in range(1, 6)} if whole else {}
        m, se = mean_sem(per_seed)
        ups = [speeds[s]["updates_per_s"] for s in seeds if s in speeds and speeds[s]["updates_per_s"]]
        out["public"] = {"per_seed": per_seed, "seeds": whole, "steps": steps, "episodes": episodes,
                         "tasks": task_means, "speeds": speeds, "partial": {s: sorted(by_seed[s]) for s in seeds if s not in whole}}
        lines.append(f"| public (P3) | {', '.join(map(str, whole))} | {'/'.join(map(str, steps))} | {fmt(m, se)} | "
                     f"{', '.join(f'{v:.1f}' for v in per_seed)} | {' / '.join(f'{task_means[t]:.1f}' for t in sorted(task_means))} | "
                     f"{' / '.join(f'{u:.0f}' for u in ups)} (each process) |")
    if ours:
        m, se = mean_sem(ours["per_seed"])
        tasks = " / ".join(f"{ours['tasks'][t]:.1f}" for t in sorted(ours["tasks"]))
        ups = f"{ours['updates_per_s']:.0f} (2 seeds vmapped)" if ours["updates_per_s"] else "n/a"
        lines.append(f"| ours | {', '.join(map(str, ours['seeds']))} | {ours['steps']} | {fmt(m, se)} | "
                     f"{', '.join(f'{v:.1f}' for v in ours['per_seed'])} | {tasks} | {ups} |")
    print("\n".join(lines))
    json.dump(out, open(os.path.join(root, "table.json"), "w"), indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
