"""Variants of one agent on one OGBench dataset, trained side by side, in one table.

    python research/ogbench/ablate.py scene-play-v0 --variants default= gamma099=gamma=0.99 \\
        "public-code=gamma=0.99 lam=0.99" --seeds 0 1 --vmap-seeds --gpus 0 1 \\
        --steps 200000 --eval-start 200000 --eval-every 200000 --set matmul_precision=tensorfloat32

Each variant `NAME=OVERRIDES` (agent overrides as `--set` takes them, space-separated, after
`--set`'s; empty for the agent's defaults) is one `mqe-ogbench train` row under `<runs-dir>/NAME`,
trained, evaluated, scored and resumed exactly as that command does. The runs of all variants (per
variant all seeds in one vmapped run with `--vmap-seeds`, else a run per seed) go to the `--gpus` as
they free up (`--runs-per-gpu N`: N runs at once on each; a GPU frees up when its run's updates end,
its last evaluations going on on the CPUs: `--no-handoff` waits for them), in the order the variants
are given; without `--gpus` one after another. The first
variant is the baseline: the table gives every other variant's difference from it, with the
standard error sqrt(se_a^2 + se_b^2), its per-task success over the scored evaluations, and its
updates per second. The table, `<runs-dir>/<dataset>-<agent>-ablation.{json,md}`, is rewritten each
time a variant finishes, so a sweep stopped early keeps what it finished. A variant that fails is
reported and the others go on (exit 2 at the end). Bad input: one line, exit 2, before any work.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tyro

from mqe_model.agents import registry
from mqe_model.agents.configs import apply_overrides
from mqe_model.cli_logging import setup_logging
from mqe_model.metrics import read_evaluations
from mqe_model.ogbench import generate, gpus, reproduce
from mqe_model.ogbench.reproduce import ReproduceError

logger = logging.getLogger(__name__)

VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # a directory name, nothing else


@dataclasses.dataclass(frozen=True)
class Variant:
    """One configuration of the ablation."""

    name: str  # its directory under --runs-dir and its label in the table
    overrides: tuple[str, ...]  # agent overrides, key=value, applied after --set


def parse_variants(items: tuple[str, ...], agent: str, preset: str, common: tuple[str, ...]) -> list[Variant]:
    """`NAME=OVERRIDES` items as Variants; each variant's overrides, after `common` (the protocol's
    overrides for the dataset, then `--set`, as the runs will apply them), must build a valid agent config."""
    if len(items) < 2:
        raise ReproduceError("--variants: give at least two NAME=OVERRIDES, the first being the baseline "
                             "(e.g. --variants default= lam099=lam=0.99)")
    variants = []
    for item in items:
        name, sep, overrides = item.partition("=")
        if not sep or not VARIANT_NAME.fullmatch(name):
            raise ReproduceError(f"--variants {item!r}: write NAME=OVERRIDES with a NAME of letters, digits, "
                                 "'_', '.' or '-' (e.g. lam099=lam=0.99, or default= for no override)")
        variant = Variant(name, tuple(overrides.split()))
        try:
            apply_overrides(registry.get(agent).get_config(preset), (*common, *variant.overrides))
        except (ValueError, TypeError) as e:
            raise ReproduceError(f"--variants {item!r}: {e}") from None
        variants.append(variant)
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ReproduceError(f"--variants: names repeat ({' '.join(names)}); each names its own directory")
    return variants


@dataclasses.dataclass(frozen=True)
class AblateConfig(reproduce.ReproduceConfig):
    """Train several variants of one agent on one OGBench dataset and compare them."""

    variants: tuple[str, ...] = ()  # NAME=OVERRIDES each, e.g. "lam099=lam=0.99"; the first is the baseline

    def for_variant(self, variant: Variant) -> reproduce.ReproduceConfig:
        """The `mqe-ogbench train` configuration of one variant."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(reproduce.ReproduceConfig)}
        return reproduce.ReproduceConfig(**{**fields, "runs_dir": self.runs_dir / variant.name,
                                            "set": (*self.set, *variant.overrides)})


def scored_task_success(workdir: Path) -> list[float]:
    """A run's success % per task, averaged over its scored (last 3) evaluations; [] before any."""
    scored = read_evaluations(workdir)[-reproduce.SCORED_EVALUATIONS:]
    tasks = sorted(int(m.group(1)) for key in (scored[-1] if scored else {})
                   if (m := re.fullmatch(r"eval/task(\d+)_success", key)))
    return [100.0 * float(np.mean([row[f"eval/task{k}_success"] for row in scored])) for k in tasks]


def median_updates_per_s(workdir: Path) -> float | None:
    """The median of a run's logged `perf/steps_per_s`; None if it logged none."""
    rates = [row["perf/steps_per_s"] for row in read_evaluations(workdir, "perf/steps_per_s")]
    return float(np.median(rates)) if rates else None


def variant_figures(row: dict[str, Any]) -> dict[str, Any]:
    """Per-task success and updates per second of a variant's row, each the mean over its runs."""
    workdirs = sorted({Path(run["workdir"]) for run in row["runs"]})
    tasks = [scored_task_success(w) for w in workdirs]
    rates = [r for r in map(median_updates_per_s, workdirs) if r is not None]
    return {"tasks": np.mean(tasks, axis=0).tolist() if all(tasks) else [],
            "updates_per_s": float(np.mean(rates)) if rates else None}


def comparison(variants: list[Variant], rows: dict[str, dict[str, Any]], failures: dict[str, str]) -> list[dict]:
    """One entry per variant, in order: its score, its difference from the baseline, its figures."""
    baseline = rows.get(variants[0].name)
    entries = []
    for variant in variants:
        entry: dict[str, Any] = {"variant": variant.name, "overrides": list(variant.overrides)}
        row = rows.get(variant.name)
        if row is None:
            entry["status"] = "failed" if variant.name in failures else "pending"
            entry["error"] = failures.get(variant.name)
            entries.append(entry)
            continue
        entry |= {"status": "done", "success_mean": row["success_mean"], "success_sem": row["success_sem"],
                  "success_per_seed": row["success_per_seed"], "minutes_per_run": row["seconds_per_run"] / 60,
                  **variant_figures(row)}
        if baseline is not None and variant is not variants[0]:
            entry["vs_baseline"] = row["success_mean"] - baseline["success_mean"]
            sems = (row["success_sem"], baseline["success_sem"])
            entry["vs_baseline_sem"] = None if None in sems else math.hypot(*sems)
        entries.append(entry)
    return entries


def markdown(entries: list[dict[str, Any]], baseline: str) -> str:
    """The comparison as a Markdown table."""
    lines = [f"| variant | overrides | success % (mean ± s.e.) | per seed | vs {baseline} | per task | "
             "updates/s | minutes per run |", "|" + " --- |" * 8]
    for e in entries:
        if e["status"] != "done":
            lines.append(f"| {e['variant']} | {' '.join(e['overrides']) or '—'} | {e['status']} | | | | | |")
            continue
        sem = "" if e["success_sem"] is None else f" ± {e['success_sem']:.1f}"
        delta = "" if "vs_baseline" not in e else f"{e['vs_baseline']:+.1f}" + (
            "" if e["vs_baseline_sem"] is None else f" ± {e['vs_baseline_sem']:.1f}")
        rate = "" if e["updates_per_s"] is None else f"{e['updates_per_s']:.0f}"
        lines.append(f"| {e['variant']} | {' '.join(e['overrides']) or '—'} | {e['success_mean']:.1f}{sem} | "
                     f"{', '.join(f'{s:.1f}' for s in e['success_per_seed'])} | {delta} | "
                     f"{', '.join(f'{t:.1f}' for t in e['tasks'])} | {rate} | {e['minutes_per_run']:.1f} |")
    return "\n".join(lines) + "\n"


def write_table(cfg: AblateConfig, dataset: str, variants: list[Variant], rows: dict[str, dict[str, Any]],
                failures: dict[str, str]) -> Path:
    """`<runs-dir>/<dataset>-<agent>-ablation.{json,md}`, each written whole under a temporary name first."""
    entries = comparison(variants, rows, failures)
    stem = cfg.runs_dir / f"{dataset}-{cfg.agent}-ablation"
    cfg.runs_dir.mkdir(parents=True, exist_ok=True)
    report = {"dataset": dataset, "agent": cfg.agent, "steps": cfg.steps, "seeds": list(cfg.seeds),
              "common_overrides": list(cfg.set), "baseline": variants[0].name, "variants": entries}
    for suffix, text in ((".json", json.dumps(report, indent=2) + "\n"), (".md", markdown(entries, variants[0].name))):
        tmp = stem.with_name(stem.name + suffix + ".tmp")
        tmp.write_text(text)
        tmp.replace(stem.with_name(stem.name + suffix))
    return stem.with_name(stem.name + ".md")


def ablate(cfg: AblateConfig) -> dict[str, str]:
    """Train every variant, write each row and the comparison; returns the failures by variant."""
    if cfg.out is not None:
        raise ReproduceError("--out names one row; an ablation writes one per variant, under --runs-dir/NAME")
    # Checked before any work, against the settings the runs will get: a stitch dataset's random actor
    # goals, for one, make variants valid that the bare config would refuse.
    common = (*reproduce.protocol_overrides(cfg.agent, reproduce.dataset_name(cfg)), *cfg.set)
    variants = parse_variants(cfg.variants, cfg.agent, cfg.preset, common)
    dataset, data, generated_by = reproduce.prepare(cfg)
    groups = reproduce.seed_groups(list(cfg.seeds), cfg.vmap_seeds, 1)
    configs = {v.name: cfg.for_variant(v) for v in variants}
    runs: dict[str, list[dict[str, Any]]] = {v.name: [] for v in variants}
    remaining = {v.name: len(groups) for v in variants}
    rows: dict[str, dict[str, Any]] = {}
    failures: dict[str, str] = {}
    lock = threading.Lock()

    def job(name: str, seeds: list[int], gpu: str | None, release_gpu: Callable[[], None]) -> None:
        try:
            result = reproduce.train_run(configs[name], dataset, data, seeds, gpu, release_gpu)
        except ReproduceError as e:
            result = e
        with lock:
            if isinstance(result, ReproduceError):
                failures[name] = str(result)
                logger.error("%s: %s", name, result)
            else:
                runs[name] += result
            remaining[name] -= 1
            if remaining[name] == 0 and name not in failures:
                rows[name] = reproduce.summarize(configs[name], dataset, data, generated_by, runs[name])
                reproduce.write_row(configs[name], dataset, rows[name])
                logger.info("%s: success %.1f%%", name, rows[name]["success_mean"])
            table = write_table(cfg, dataset, variants, rows, failures)
        logger.info("comparison so far in %s", table)

    jobs = [functools.partial(job, v.name, seeds) for v in variants for seeds in groups]
    for future in gpus.on_free_gpus(cfg.gpu_slots, jobs):
        future.result()  # a job reports its variant's failure itself; anything else is a bug, raised here
    return failures


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (2 for bad input or a failed variant)."""
    setup_logging()
    try:
        failures = ablate(tyro.cli(AblateConfig, args=argv))
    except (ReproduceError, generate.GenerateError) as e:
        print(f"ablate: error: {e}", file=sys.stderr)
        return 2
    for name, error in failures.items():
        print(f"ablate: error: variant {name}: {error}", file=sys.stderr)
    return 2 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
