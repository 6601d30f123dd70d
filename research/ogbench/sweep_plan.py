"""The plan of `research/ogbench/sweep.sh`: each entry's updates from its probe's updates per second.

    python research/ogbench/sweep_plan.py WORK DATASET:GPU:SECONDS:EVALS:AGENT+AGENT ... \\
        --seeds SEEDS --preset PRESET (--rates "SET/AGENT=RATE ..." --safety SAFETY --unit UNIT | --steps N)

Writes WORK/plan.json and prints one line per entry: dataset, GPU, agents, updates, evaluation
interval, first evaluation. With `--steps` every entry gets N updates (no probes; SECONDS is not
used). The script has already checked the entries' syntax.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def shared_rate(rates: Sequence[float]) -> float:
    """Updates per second of each of the runs that share one GPU and stop at the same number of
    updates, from their rates measured while all of them ran.

    The GPU time-slices among the processes, so during the probe each had about 1/k of it, and an
    update of run a costs 1/(k r_a) seconds of the whole GPU. N updates of every run then take
    N * sum_a 1/(k r_a) seconds: the fast runs finish early and leave the GPU to the slow ones, which
    speed up. (The first sweep's probe gave MQE, GCIQL and GCBC 115, 390 and 1580 updates/s together
    on scene-play; its slowest rate would plan 115 where the runs averaged 247-301; this gives 252.)
    """
    if not rates or min(rates) <= 0:
        raise ValueError(f"rates must be positive, got {list(rates)}")
    return len(rates) / sum(1.0 / r for r in rates)


WORKER_MEMORY = 1 << 30  # bytes an evaluation worker may take (scene-play workers showed ~0.65 GB RSS in `ps`)


def available_memory() -> int:
    """Bytes the kernel can give new processes now, page cache included (`MemAvailable`; the data
    just generated sits in the cache), or the free pages where /proc/meminfo is missing."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def evaluation_workers(cores: int, runs: int, memory_available: int | None = None) -> int:
    """Evaluation workers per run: every core the training processes leave (one each), as many as
    the free memory holds across all runs, at least 2.

    The runs' evaluations come at different times (GCBC trains 3x faster than MQE), so a fixed share
    per run leaves cores idle: on a 64-CPU machine GCBC's 6 workers were still on
    its first scene-play evaluation after 9 minutes while MQE's 12 waited for theirs. The workers run
    niced (`mqe_model.evaluation.init_worker`), so the training processes keep their cores when all
    evaluate at once."""
    if memory_available is None:
        memory_available = available_memory()
    return max(2, min(cores - runs, memory_available // WORKER_MEMORY // max(1, runs)))


def plan(rates: dict[str, float], entries: Sequence[str], safety: float, unit: int, seeds: int,
         preset: str, steps: int | None = None) -> dict[str, Any]:
    """The plan: for each entry DATASET:GPU:SECONDS:EVALS:AGENTS, `steps` updates if given, else
    safety x shared rate x seconds rounded down to a multiple of `unit` (at least `unit`); evaluated
    every tenth, the last EVALS."""
    out: dict[str, Any] = {"probe_updates_per_s": rates, "safety": safety, "seeds": seeds, "preset": preset,
                           "fixed_steps": steps, "rows": []}
    for entry in entries:
        name, gpu, seconds, evals, agents = entry.split(":")
        if steps is None:
            rate = shared_rate([rates[f"{agents}/{agent}"] for agent in agents.split("+")])
            row_steps = max(unit, int(safety * rate * int(seconds)) // unit * unit)
        else:
            rate, row_steps = None, steps
        every = row_steps // 10
        out["rows"].append({"dataset": name, "gpu": int(gpu), "agents": agents.split("+"),
                            "seconds": int(seconds), "updates_per_s": rate, "steps": row_steps,
                            "eval_every": every, "eval_start": row_steps - (int(evals) - 1) * every})
    return out


def main(argv: list[str] | None = None) -> int:
    """Write WORK/plan.json and print the rows for the script to read."""
    parser = argparse.ArgumentParser(prog="research/ogbench/sweep_plan.py")
    parser.add_argument("work", type=Path)
    parser.add_argument("entries", nargs="+")
    parser.add_argument("--seeds", type=int, required=True)
    parser.add_argument("--preset", required=True)
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--rates", help='the probes\' "SET/AGENT=RATE ..." (updates/s)')
    budget.add_argument("--steps", type=int, help="updates per run, for every entry (no probes)")
    parser.add_argument("--safety", type=float, default=0.8)
    parser.add_argument("--unit", type=int, default=10_000)
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 10:
        parser.error(f"--steps {args.steps}: give at least 10 updates (a tenth of the run is the evaluation interval)")
    measured = {} if args.rates is None else {run: float(r) for run, r in (item.split("=") for item in args.rates.split())}
    result = plan(measured, args.entries, args.safety, args.unit, args.seeds, args.preset, args.steps)
    (args.work / "plan.json").write_text(json.dumps(result, indent=2) + "\n")
    for row in result["rows"]:
        print(row["dataset"], row["gpu"], "+".join(row["agents"]), row["steps"], row["eval_every"],
              row["eval_start"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
