"""One benchmark under several XLA_FLAGS settings, each in a fresh process, each figure as a ratio to
the first setting's.

XLA reads XLA_FLAGS once, when its backend starts, so settings cannot share a process. The target
benchmark writes its figures with `--json`; a setting XLA refuses (an unknown flag or value aborts
the process) is reported with the last line of its error output instead of figures.

    python -m benchmarks.xla_flags                                   # train_step, the default settings
    python -m benchmarks.xla_flags --target act_latency --target-args="--preset bridge --profile-calls 0"
    python -m benchmarks.xla_flags --variant base= --variant "graphs=--xla_gpu_graph_min_graph_size=1"
    python -m benchmarks.xla_flags --target train_throughput --target-args="--preset bridge --devices 1 2 --bare-only"

The default settings of train_step and act_latency are questions about kernel launches on a GPU
(issue 2: ~276 kernels per MQE update; issue 6: ~429 per image act): XLA's default command buffers
(CUDA graphs) against none, against command buffers that also take loops and conditionals, and
cuDNN's fused LayerNorm. Those of train_throughput are about the data-parallel update's gradient
all-reduce (issue 3): overlapped with the backward pass by the latency hiding scheduler, or combined
into one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Literal

import tyro

TARGETS = {"train_step": "benchmarks.train_step", "act_latency": "benchmarks.act_latency",
           "train_throughput": "benchmarks.train_throughput"}
LAUNCH_VARIANTS = (
    "default=",
    "no command buffers=--xla_gpu_enable_command_buffer=",
    "loops in command buffers=--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,"
    "WHILE,CONDITIONAL --xla_gpu_graph_min_graph_size=1",
    "cuDNN LayerNorm=--xla_gpu_enable_cudnn_layer_norm=true",
)
# Issue 3: the data-parallel update scales 1.42-1.47x on 2 GPUs, its gradient all-reduce not overlapped
# with the backward pass. Overlap (the latency hiding scheduler, which NVIDIA's JAX images turn on)
# and fewer, larger all-reduces are the questions.
OVERLAP_VARIANTS = (
    "default=",
    "latency hiding scheduler=--xla_gpu_enable_latency_hiding_scheduler=true",
    "one combined all-reduce=--xla_gpu_all_reduce_combine_threshold_bytes=1073741824",
)
DEFAULT_VARIANTS = {"train_step": LAUNCH_VARIANTS, "act_latency": LAUNCH_VARIANTS, "train_throughput": OVERLAP_VARIANTS}


@dataclasses.dataclass(frozen=True)
class Args:
    """A benchmark under several XLA_FLAGS settings."""

    target: Literal["train_step", "act_latency", "train_throughput"] = "train_step"  # benchmark module to run
    target_args: str = ""  # its arguments as one shell-quoted string; write --target-args="--preset ..."
    # NAME=FLAGS, repeatable; the first is the baseline; none given: the target's DEFAULT_VARIANTS
    variant: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    timeout_s: float = 900.0  # seconds one setting may run


def parse_variants(items: tuple[str, ...]) -> list[tuple[str, str]]:
    """(name, flags) pairs from NAME=FLAGS items; a ValueError names the bad one."""
    variants = []
    for item in items:
        name, sep, flags = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--variant {item!r}: expected NAME=FLAGS, e.g. --variant 'graphs=--xla_gpu_graph_min_graph_size=1'")
        variants.append((name.strip(), flags.strip()))
    names = [name for name, _ in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"--variant names repeat: {names}")
    return variants


def run_variant(module: str, target_args: str, flags: str, timeout_s: float) -> dict[str, float] | str:
    """The target's figures under `flags` added to XLA_FLAGS, or why it produced none."""
    with tempfile.TemporaryDirectory(prefix="xla-flags-") as tmp:
        out = Path(tmp) / "figures.json"
        env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip(),
               "PYTHONUNBUFFERED": "1"}  # a target stopped by the timeout keeps what it printed
        try:
            proc = subprocess.run([sys.executable, "-m", module, *shlex.split(target_args), "--json", str(out)],
                                  env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            return f"no figures: still running after {timeout_s:g} s{output_so_far(e.stdout)}"
        if proc.returncode != 0 or not out.is_file():
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            return f"no figures (exit {proc.returncode}): {lines[-1] if lines else 'no output'}"
        return json.loads(out.read_text())


def output_so_far(stdout: bytes | str | None, lines: int = 3) -> str:
    """The last lines a target printed before it was stopped (figures it had already measured)."""
    text = stdout.decode(errors="replace") if isinstance(stdout, bytes) else (stdout or "")
    tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return f"; its last output: {' | '.join(tail)}" if tail else ""


def format_results(results: list[tuple[str, str, dict[str, float] | str]]) -> str:
    """One block per figure: each setting's value and its ratio to the baseline's."""
    base, lines = results[0][2], []
    for name, flags, figures in results:
        lines.append(f"setting {name!r}: XLA_FLAGS+={flags!r}" + ("" if isinstance(figures, dict) else f" -> {figures}"))
    for key, base_value in base.items():
        lines.append(f"\n{key}")
        for name, _, figures in results:
            if isinstance(figures, dict) and key in figures:
                lines.append(f"  {name:<28}{figures[key]:>12.3f}{figures[key] / base_value:>8.2f}x")
            else:
                lines.append(f"  {name:<28}{'-':>12}")
    return "\n".join(lines)


def format_partial(result: tuple[str, str, dict[str, float] | str], base: dict[str, float] | str) -> str:
    """One setting's figures as soon as it has run, each with its ratio to the baseline's where known."""
    name, _, figures = result
    if not isinstance(figures, dict):
        return f"  {name}: {figures}"
    ratio = lambda key: (f" ({figures[key] / base[key]:.2f}x)"  # noqa: E731
                         if isinstance(base, dict) and base.get(key) else "")
    return "\n".join(f"  {name}: {key} = {value:.3f}{ratio(key)}" for key, value in figures.items())


def main(argv: list[str] | None = None) -> int:
    """Run every setting and print the comparison; exit 2 on bad arguments, 1 if the baseline fails."""
    args = tyro.cli(Args, args=argv)
    try:
        variants = parse_variants(args.variant or DEFAULT_VARIANTS[args.target])
    except ValueError as e:
        print(f"xla_flags: error: {e}", file=sys.stderr)
        return 2
    module = TARGETS[args.target]
    results = []
    for name, flags in variants:
        print(f"running {module} with {name!r} ...", flush=True)
        start = time.perf_counter()
        results.append((name, flags, run_variant(module, args.target_args, flags, args.timeout_s)))
        print(format_partial(results[-1], results[0][2]), flush=True)  # a run cut short keeps these
        print(f"  ({time.perf_counter() - start:.0f} s)", flush=True)
    if not isinstance(results[0][2], dict):
        print(f"xla_flags: error: the baseline {results[0][0]!r} gave {results[0][2]}", file=sys.stderr)
        return 1
    print(format_results(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
