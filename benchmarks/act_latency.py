"""Where one served act's time goes: the runtime's compiled act, back to back and paced, with kernels.

    python -m benchmarks.act_latency --preset bridge              # a random bridge checkpoint
    python -m benchmarks.act_latency --checkpoint runs/mqe --hz 5

Times `PolicyRuntime.act_batch` for one batch size as the server calls it (a numpy frame; goal codes from
`encode_goal`, which stay on the device while they repeat), called back to back and called at `--hz` with the device idle in
between (as one robot at 5 Hz does), and, on a GPU, reads a JAX profiler trace of `--profile-calls`
acts: device time of the kernels, number of launches, and the largest kernels; then two traces of acts
2 ms apart and at `--hz`, each act's kernels told apart by the idle gaps: whether a paced act's kernels
run slower (the device's clocks) or the same kernels spread over a longer span (the host). Also times the
encoding of one goal (done once per goal by `POST /v1/goals`). For an image MQE policy it measures
the serving arrangements of its two encoders (`--encoders`; all that apply by default): run
separately (the CPU server's choice), stacked into one vmapped network, and for a ResNet as one
network of twice the width (the GPU server's; `PolicyRuntime.load(..., encoders=...)`), and prints each
one's ratio to the ones measured before it. `--layouts both` also measures each arrangement with its weights row-major, as the server
kept them before it stored them in the layout XLA chose (`PolicyRuntime.load(..., device_layouts=...)`).
`--convs xla matmul` measures each arrangement with its convolutions as XLA's op and as strided slices
and one matmul each (`PolicyRuntime.load(..., conv=...)`; the GPU server's), whose act CUDA graphs can
hold whole.
`--io device host` measures each with its frame and answer moved by transfers of their own (the
server's way) and through pinned host memory, the copies inside the compiled act
(`PolicyRuntime.load(..., host_io=True)`).
`--phases` also splits the act into its three steps, back to back and paced: copying the frame and goal
codes to the device, running the executable to completion, and copying the action and distance back, to
show which step a lone robot's slower act loses its time in.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import jax
import numpy as np
import tyro

from benchmarks.kernels import kernel_profile

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Args:
    """Act latency of a served policy."""

    checkpoint: Path | None = None  # a checkpoint; None: a random one of --preset
    preset: str = "bridge"  # MQE preset of the random checkpoint
    set: tuple[str, ...] = ()  # config overrides of the random checkpoint, e.g. encoder=impala_tiny
    image_size: int = 128  # image size of the random checkpoint; 0 for a state policy
    batch: int = 1  # batch size (compiled bucket) to time
    runs: int = 200  # back-to-back calls timed
    hz: float = 5.0  # rate of the paced calls
    paced_runs: int = 20  # paced calls timed
    profile_calls: int = 20  # acts in each profiler trace (GPU only; 0: no traces)
    top: int = 12  # kernels listed
    layouts: Literal["device", "row-major", "both"] = "device"  # weights in the layout XLA chose (the server's), row-major, or both
    encoders: tuple[str, ...] = ()  # encoder arrangements to measure (separate, stacked, twin); (): all the policy has
    json: Path | None = None  # also write the figures (ms) here
    phases: bool = False  # also time the act's steps (inputs to the device, run, outputs back), back to back and paced
    convs: tuple[Literal["xla", "matmul"], ...] = ("xla",)  # convolutions of each arrangement: xla (XLA's op), matmul (slices and a matmul), or both
    io: tuple[Literal["device", "host"], ...] = ("device",)  # frame in, answer out: device (transfers of their own), host (pinned host memory, copied inside the act), or both


def main(argv: list[str] | None = None) -> int:
    """Run and print the figures."""
    args = tyro.cli(Args, args=argv)
    from server.runtime import PolicyRuntime

    checkpoint = args.checkpoint
    if checkpoint is None:
        from server.random_checkpoint import write_random_checkpoint

        try:
            checkpoint = write_random_checkpoint(Path(tempfile.mkdtemp(prefix="act-bench-")), "mqe", args.preset,
                                                 args.set, args.image_size or None)
        except ValueError as e:
            print(f"act_latency: error: {e}", file=sys.stderr)
            return 2
    device, report, figures_of = jax.devices()[0], {}, {}
    try:
        measured = arrangements(checkpoint, args.layouts, args.encoders)
    except ValueError as e:
        print(f"act_latency: error: {e}", file=sys.stderr)
        return 2
    for (arrangement, layouts), conv, io in itertools.product(measured, args.convs, args.io):
        runtime = PolicyRuntime.load(checkpoint, buckets=(args.batch,), encoders=arrangement, device_layouts=layouts,
                                     conv=conv, host_io=io == "host")
        if not figures_of:
            print(f"{runtime.policy.agent_name} checkpoint {checkpoint}, batch {args.batch}, on {device.device_kind} "
                  f"({device.platform}), jax {jax.__version__}")
        figures = figures_of[arrangement, layouts, conv, io] = measure(runtime, args)
        weights = (("" if layouts else ", row-major weights") + ("" if conv == "xla" else ", matmul convolutions")
                   + ("" if io == "device" else ", host io"))
        layout, label = f"{arrangement}{weights}", f"{arrangement} encoders{weights}"
        print(f"[{label}] goal encoding (once per goal): p50 {figures['goal']:.3f} ms")
        print(f"[{label}] act back to back: p50 {figures['back_to_back']:.3f} ms, p10 {figures['p10']:.3f} ms "
              f"({args.runs} calls)")
        print(f"[{label}] act at {args.hz:g} Hz (device idle in between): p50 {figures['paced']:.3f} ms, "
              f"ratio to back to back {figures['paced'] / figures['back_to_back']:.2f}")
        for phase, (together, paced) in figures.get("phases", {}).items():
            print(f"[{label}] step {phase:>6}: p50 {together:.3f} ms back to back, {paced:.3f} ms at {args.hz:g} Hz "
                  f"({paced / together:.2f}x)")
            report.update({f"{layout}: {phase} back to back ms": together, f"{layout}: {phase} at {args.hz:g} Hz ms": paced})
        if device.platform == "gpu" and args.profile_calls:
            kernel_us, launches, rows, *_ = kernel_profile(figures["call"], args.profile_calls)
            print(f"[{label}] kernels per act: {kernel_us:.1f} us of device time in {launches:.0f} launches "
                  f"({kernel_us / 1e3 / figures['back_to_back']:.0%} of the back-to-back time)")
            for name, us, count in rows[:args.top]:
                print(f"{us:9.1f} us {100 * us / kernel_us:5.1f}%  x{count:5.1f}  {name[:80]}")
            report.update(spaced_profiles(figures["call"], args, label, layout))
        report.update({f"{layout}: goal encoding ms": figures["goal"],
                       f"{layout}: act back to back ms": figures["back_to_back"],
                       f"{layout}: act at {args.hz:g} Hz ms": figures["paced"]})
        # each arrangement against the one that differs from it in one thing, measured before it
        others = [((a, layouts, conv, io), f"{arrangement} / {a}") for a in ("separate", "stacked")]
        for other, name in (*others, ((arrangement, False, conv, io), f"device / row-major weights ({arrangement})"),
                            ((arrangement, layouts, "xla", io), f"matmul / xla convolutions ({arrangement})"),
                            ((arrangement, layouts, conv, "device"), f"host / device io ({arrangement})")):
            if other != (arrangement, layouts, conv, io) and other in figures_of:
                print(f"{name}: back to back "
                      f"{figures['back_to_back'] / figures_of[other]['back_to_back']:.2f}x, at {args.hz:g} Hz "
                      f"{figures['paced'] / figures_of[other]['paced']:.2f}x")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


WARM_GAP_S = 0.002  # acts this far apart ran at their back-to-back speed (docs/performance.md)


def spaced_profiles(call: Callable[[], None], args: Args, label: str, layout: str) -> dict[str, float]:
    """Traces of acts 2 ms apart and at `args.hz`, printed: kernel time, launches, and each act's device
    span (first kernel start to last kernel end) and how busy the device was in it. Kernels slower at
    `--hz` mean a slower device (its clocks); the same kernels in a longer span mean gaps between them,
    the device waiting for the host to launch them."""
    warm = kernel_profile(call, args.profile_calls, WARM_GAP_S)
    profiles = {"2 ms apart": warm, f"at {args.hz:g} Hz": kernel_profile(call, args.profile_calls, 1.0 / args.hz)}
    figures = {}
    for name, profile in profiles.items():
        compared = profile is not warm
        ratio = f" ({profile.kernel_us / warm.kernel_us:.2f}x 2 ms apart)" if compared and warm.kernel_us else ""
        if profile.span_us is None:
            span = "device span n/a (the acts' kernels did not separate)"
        else:
            span_ratio = f" ({profile.span_us / warm.span_us:.2f}x)" if compared and warm.span_us else ""
            span = f"device span p50 {profile.span_us:.1f} us{span_ratio}, kernels busy {profile.busy:.0%} of it"
            figures[f"{layout}: device span {name} us"] = profile.span_us
        print(f"[{label}] kernels {name}: {profile.kernel_us:.1f} us in {profile.launches:.0f} launches per act"
              f"{ratio}; {span}")
        figures[f"{layout}: kernels {name} us"] = profile.kernel_us
    return figures


def arrangements(checkpoint: Path, layouts: str, wanted: tuple[str, ...] = ()) -> list[tuple[str, bool]]:
    """(encoder arrangement, device layouts) pairs to measure: the `wanted` arrangements (all that the
    policy has when empty), each with row-major weights and/or in the device's layout (`--layouts`)."""
    from mqe_model import checkpoints
    from mqe_model.agents.configs import config_from_json
    from mqe_model.policy import encoder_arrangements

    metadata = checkpoints.read_metadata(checkpoints.resolve_step_dir(checkpoint))  # the weights load later
    available = encoder_arrangements(metadata["agent"], config_from_json(metadata["agent"], metadata["config"]))
    if missing := [a for a in wanted if a not in available]:
        raise ValueError(f"--encoders {' '.join(missing)}: this {metadata['agent']} policy has only "
                         f"{', '.join(available)}")
    choices = {"both": (False, True), "device": (True,), "row-major": (False,)}[layouts]
    return [(arrangement, layout) for arrangement in (wanted or available) for layout in choices]


def measure(runtime: Any, args: Args) -> dict[str, Any]:
    """Goal encoding, back-to-back and paced act times (ms) of one runtime, and its act call."""
    shape, dtype = runtime.policy.observation_shape, runtime.observation_dtype
    rng = np.random.default_rng(0)
    sample = (lambda n: rng.integers(0, 256, (n, *shape), dtype=np.uint8)) if dtype == np.uint8 else (
        lambda n: rng.standard_normal((n, *shape)).astype(dtype))
    observations = sample(args.batch)
    goal_times = []
    for goal in sample(10):
        start = time.perf_counter()
        codes = runtime.encode_goal(goal, preprocessed=True)
        goal_times.append((time.perf_counter() - start) * 1e3)
    codes = np.repeat(codes[None], args.batch, axis=0)
    act = runtime._compiled[args.batch]

    def call() -> None:  # as the server acts: the goal's codes stay on the device while they repeat
        runtime.act_batch(observations, codes)

    def timed_call() -> float:
        start = time.perf_counter()
        call()
        return (time.perf_counter() - start) * 1e3

    back_to_back, paced = back_to_back_and_paced(timed_call, args, warmup=10)
    figures = {"goal": statistics.median(goal_times[1:]), "back_to_back": statistics.median(back_to_back),
               "p10": float(np.percentile(back_to_back, 10)), "paced": statistics.median(paced), "call": call}
    if args.phases:
        figures["phases"] = timed_steps(runtime, act, observations, codes, args)
    return figures


def back_to_back_and_paced(timed: Callable[[], T], args: Args, warmup: int) -> tuple[list[T], list[T]]:
    """What `timed` returns (its own timings) over `args.runs` calls back to back, after `warmup`
    untimed ones, then over `args.paced_runs` calls at `args.hz`, the device idle in between."""
    for _ in range(warmup):
        timed()
    together = [timed() for _ in range(args.runs)]
    paced = []
    for _ in range(args.paced_runs):
        time.sleep(1.0 / args.hz)
        paced.append(timed())
    return together, paced


def timed_steps(runtime: Any, act: Any, observations: np.ndarray, codes: np.ndarray,
                args: Args) -> dict[str, tuple[float, float]]:
    """p50 ms of the act's three steps, (back to back, paced at `args.hz`): the inputs put where the
    executable takes them (the device, or pinned host memory for the frame with `host_io`), the
    executable run to completion on them, and its outputs fetched to the host."""
    _, frame_at, codes_at = act.input_shardings[0]

    def steps() -> tuple[float, float, float]:
        t0 = time.perf_counter()
        inputs = jax.block_until_ready((jax.device_put(observations, frame_at), jax.device_put(codes, codes_at)))
        t1 = time.perf_counter()
        outputs = jax.block_until_ready(act(runtime._params, *inputs))
        t2 = time.perf_counter()
        jax.device_get(outputs)
        t3 = time.perf_counter()
        return (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3

    together, paced = back_to_back_and_paced(steps, args, warmup=5)
    return {name: (statistics.median(t[i] for t in together), statistics.median(t[i] for t in paced))
            for i, name in enumerate(("put", "run", "get"))}


if __name__ == "__main__":
    raise SystemExit(main())
