"""Settings of `mqe-serve`: one frozen config from the command line, with defaults from `MQE_SERVE_*`.

Every field except `policy` may also come from the environment variable `MQE_SERVE_<FIELD>` (upper
case, e.g. `MQE_SERVE_PORT=9000`); the command line wins. The bearer token is also read from
`MQE_SERVER_TOKEN`. Checkpoint directories come from the command line only, so nothing a client or
a stray environment sends can make the server load other weights.
An `MQE_SERVE_*` name that is no setting (misspelt, or one a later version removed) stops the server
with one line naming it, rather than being ignored.

This module imports neither jax nor fastapi, so `mqe-serve --help` and settings errors are instant.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import math
import os
import typing
from pathlib import Path
from typing import Annotated, Literal

import tyro

DEFAULT_BUCKETS = (1, 2, 4, 8, 16, 32)
ENV_PREFIX = "MQE_SERVE_"
TOKEN_ENV = "MQE_SERVER_TOKEN"
POLICY_ENV = ENV_PREFIX + "POLICY"  # read by nobody: checkpoints come from the command line only
LOOPBACK_NAMES = ("localhost",)
StackEncoders = Literal["auto", "on", "off", "twin"]  # --stack-encoders (also the latency benchmarks')
STACK_ENCODERS = typing.get_args(StackEncoders)
ConvLowering = Literal["xla", "matmul"]  # how a runtime computes convolutions; mqe_model.networks.encoders.CONV_LOWERINGS
Conv = Literal["auto", "xla", "matmul"]  # --conv (also serve_latency's): a lowering, or auto to pick one per device
CONVS = typing.get_args(Conv)
FramesIO = Literal["device", "host"]  # --io (also the latency benchmarks'): where each act takes its frames and leaves its answers
FRAMES_IO = typing.get_args(FramesIO)
GRAPH_MIN_SIZE_FLAG = "--xla_gpu_graph_min_graph_size"  # XLA_FLAGS' name for --cuda-graph-min-size


class SettingsError(ValueError):
    """A bad setting or combination; the message says which and how to fix it."""


@dataclasses.dataclass(frozen=True)
class ServeSettings:
    """Inference server configuration (see README, 'Serving a policy')."""

    policy: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()  # NAME=CHECKPOINT_DIR, repeatable; a step dir, checkpoints root or workdir
    default_policy: str | None = None  # policy used when a request names none (needed with several)
    host: str = "127.0.0.1"  # address to bind; anything but loopback needs --token or --insecure
    port: int = 8000  # TCP port
    token: str | None = dataclasses.field(default=None, repr=False)  # bearer token clients must send (also env MQE_SERVER_TOKEN)
    insecure: bool = False  # allow a non-loopback --host without a token (trusted networks only)
    max_body_bytes: int = 8 * 2**20  # larger request bodies get 413
    max_image_pixels: int = 4096 * 4096  # larger decoded images get 422 invalid_image
    batch_buckets: tuple[int, ...] = DEFAULT_BUCKETS  # batch sizes compiled at load; requests pad up
    max_wait_ms: float = 2.0  # longest a request waits for others to fill its micro-batch
    keep_warm_ms: float = 0.0  # while waiting for the next request, rerun the last act every this many ms (0: off); costs device time
    keep_warm_for_s: float = 5.0  # the periodic keeper (--keep-warm-ms) stops this many seconds after the last request
    inline_lone_requests: bool = True  # a request alone on an idle device, none other in the 20 ms before it, runs its act on the event loop thread: no hand-off to the batch worker and back (~0.2 ms at 5 Hz), but the loop reads no other request during that act
    goal_cache_size: int = 4096  # goals kept (least recently used evicted first)
    compilation_cache: str = "~/.cache/mqe-deploy/jax"  # persistent JAX compilation cache; "" disables
    episode_idle_s: float = 30.0  # an episode without requests for this long is logged as ended
    log_level: str = "info"  # debug logs one line per request; info one per episode
    stack_encoders: StackEncoders = "auto"  # image MQE: actor and critic encoders as one network (on: vmapped; twin: one ResNet twice as wide); auto: twin, except on CPUs (separate)
    conv: Conv = "auto"  # image policies' convolutions: xla (XLA's op, cuDNN on GPUs), matmul (strided slices and one matmul each, which CUDA graphs hold whole), auto: matmul on GPUs only; the same actions to rounding
    io: FramesIO = "device"  # where each act takes its frames and leaves its answers: device (a copy before the act and one after) or host (pinned host memory, the copies inside the compiled act; 0.94x the act at 5 Hz in-process on an H200, 0.75-1.05x one robot's round trip served)
    cuda_graph_min_size: int = 1  # GPUs: the fewest kernels XLA puts in one CUDA graph (its XLA_FLAGS --xla_gpu_graph_min_graph_size); 0 leaves XLA's default (5); a size in XLA_FLAGS wins

    def __post_init__(self) -> None:
        problems = []
        if not 0 < self.port < 65536:
            problems.append(f"--port {self.port} is not a TCP port (1..65535)")
        if self.max_body_bytes < 1024:
            problems.append(f"--max-body-bytes {self.max_body_bytes} is below 1024")
        if self.max_image_pixels < 1:
            problems.append("--max-image-pixels must be positive")
        if not self.batch_buckets or any(b < 1 for b in self.batch_buckets):
            problems.append(f"--batch-buckets {self.batch_buckets} must be positive sizes")
        if self.max_wait_ms < 0:
            problems.append("--max-wait-ms must be >= 0")
        if not (self.keep_warm_ms == 0 or 1 <= self.keep_warm_ms < math.inf):
            problems.append(f"--keep-warm-ms {self.keep_warm_ms:g}: use 0 (off) or a period of at least 1 ms")
        if not 0 < self.keep_warm_for_s < math.inf:
            problems.append(f"--keep-warm-for-s {self.keep_warm_for_s:g} must be a positive number of seconds")
        if self.goal_cache_size < 1:
            problems.append("--goal-cache-size must be >= 1")
        if self.log_level.lower() not in ("debug", "info", "warning", "error"):
            problems.append(f"--log-level {self.log_level!r}: choose debug, info, warning or error")
        if self.stack_encoders not in STACK_ENCODERS:
            problems.append(f"--stack-encoders {self.stack_encoders!r}: choose {', '.join(STACK_ENCODERS[:-1])} "
                            f"or {STACK_ENCODERS[-1]}")
        if self.cuda_graph_min_size < 0:
            problems.append(f"--cuda-graph-min-size {self.cuda_graph_min_size}: use 0 (XLA's default) or a "
                            "number of kernels (1: every run of kernels a graph)")
        if self.conv not in CONVS:
            problems.append(f"--conv {self.conv!r}: choose {', '.join(CONVS[:-1])} or {CONVS[-1]}")
        if self.io not in FRAMES_IO:
            problems.append(f"--io {self.io!r}: choose {' or '.join(FRAMES_IO)}")
        if self.token is not None and len(self.token) < 8:
            problems.append("--token must be at least 8 characters")
        names = [self._split(p)[0] for p in self.policy]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            problems.append(f"--policy names repeated: {duplicates}")
        if self.default_policy is not None and self.default_policy not in names:
            problems.append(f"--default-policy {self.default_policy!r} is not one of the --policy names {names}")
        if not is_loopback(self.host) and self.token is None and not self.insecure:
            problems.append(
                f"--host {self.host} is not a loopback address: set a bearer token with --token "
                f"(or env {TOKEN_ENV}), or pass --insecure on a trusted network"
            )
        if problems:
            raise SettingsError("; ".join(problems))

    @staticmethod
    def _split(item: str) -> tuple[str, Path]:
        name, sep, path = item.partition("=")
        name = name.strip()
        if not sep or not name or not path.strip() or not name.replace("-", "_").replace(".", "_").isidentifier():
            raise SettingsError(f"--policy {item!r}: expected NAME=CHECKPOINT_DIR, e.g. --policy mqe=runs/mqe")
        return name, Path(path.strip()).expanduser()

    @property
    def policies(self) -> dict[str, Path]:
        """Policy name -> checkpoint directory, in command-line order."""
        return dict(self._split(p) for p in self.policy)

    def encoders_on(self, platform: str) -> str:
        """How image MQE policies on a device of `platform` ('cpu', 'gpu', ...) run their two encoders
        (`PolicyRuntime.load`'s `encoders`). auto takes the twin (one ResNet twice as wide; others stack)
        off the CPU: on H200s it was as fast as the stacked act or faster in every run, served 0.79x with
        XLA's convolutions and 0.96x with matmuls (3.97 against 4.13 ms), in-process at 5 Hz 0.85x and 0.89x,
        at batch 32 0.85-1.02x (docs/performance.md, `benchmarks/act_latency.py`); stacked encoders were 0.90x
        the separate act on an H100. On the CPU XLA's grouped convolutions make stacking slow (1.41x):
        auto keeps the encoders separate there."""
        if self.stack_encoders == "auto":
            return "separate" if platform == "cpu" else "twin"
        return {"on": "stacked", "off": "separate", "twin": "twin"}[self.stack_encoders]

    def conv_on(self, platform: str) -> ConvLowering:
        """How image policies on a device of `platform` compute their convolutions (`PolicyRuntime.load`'s
        `conv`). auto takes matmuls on GPUs: on an H200 one robot's served round trip was 0.71x XLA's
        convolutions (twin encoders, 3.97 against 5.41-5.81 ms) and 0.58x (stacked), the batch-32 act at
        5 Hz 0.93x, back to back 1.06x-1.25x, and 100 robots at 5 Hz (batches of ~2) p99 11.4 against 34.7
        ms (old stacked act); XLA's op elsewhere, as on the CPU the two were mixed
        (docs/performance.md, `benchmarks/act_latency.py`)."""
        if self.conv == "auto":
            return "matmul" if platform == "gpu" else "xla"
        return self.conv

    @property
    def host_io(self) -> bool:
        """Whether acts take their frames from pinned host memory (`PolicyRuntime.load`'s `host_io`)."""
        return self.io == "host"

    def xla_flags(self, current: str) -> str:
        """The XLA_FLAGS the server runs with: `current` (the environment's) and `cuda_graph_min_size`,
        unless `current` sets that size itself. XLA's default (5) leaves runs of fewer kernels outside CUDA
        graphs, each kernel its own launch; at 1 on an H200 the twin matmul act at 5 Hz was 0.84x in-process,
        one robot's served round trip 0.93x (3.92 against 4.22 ms), 100 robots' p50 4.36 against 5.79 ms and
        p99 7.72 against 11.39 (docs/performance.md, `benchmarks/act_latency.py`). The CPU ignores it. XLA reads
        the flags when its first backend starts: set them in the environment before that."""
        if self.cuda_graph_min_size == 0 or GRAPH_MIN_SIZE_FLAG in current:
            return current
        return f"{current} {GRAPH_MIN_SIZE_FLAG}={self.cuda_graph_min_size}".strip()

    @property
    def compilation_cache_dir(self) -> Path | None:
        """The persistent compilation cache directory, or None when disabled."""
        return Path(self.compilation_cache).expanduser() if self.compilation_cache else None


def is_loopback(host: str) -> bool:
    """Whether binding `host` only accepts connections from this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _parse_env(field: dataclasses.Field, text: str) -> object:
    kind = str(field.type)
    if "tuple" in kind:
        return tuple(int(v) for v in text.replace(",", " ").split())
    if "bool" in kind:
        if text.lower() not in ("1", "0", "true", "false", "yes", "no"):
            raise SettingsError(f"{ENV_PREFIX}{field.name.upper()}={text!r}: expected true or false")
        return text.lower() in ("1", "true", "yes")
    if "float" in kind:
        return float(text)
    if "int" in kind:
        return int(text)
    return text


def defaults_from_env(environ: dict[str, str] | None = None) -> ServeSettings:
    """Defaults with `MQE_SERVE_*` (and `MQE_SERVER_TOKEN`) applied; not validated for policies."""
    environ = dict(os.environ if environ is None else environ)
    known = {ENV_PREFIX + field.name.upper() for field in dataclasses.fields(ServeSettings)}
    for name in sorted(n for n in environ if n.startswith(ENV_PREFIX) and n not in known):
        # Matched without the shared prefix, which would make every name look close.
        close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX),
                                          sorted(k.removeprefix(ENV_PREFIX) for k in known - {POLICY_ENV}), n=1)
        hint = f"did you mean {ENV_PREFIX}{close[0]}? " if close else ""
        raise SettingsError(f"{name} is not a setting of mqe-serve; {hint}unset it or rename it "
                            f"(each setting is {ENV_PREFIX}<FLAG>, the flags are in `mqe-serve --help`)")
    values: dict[str, object] = {}
    for field in dataclasses.fields(ServeSettings):
        if field.name == "policy":  # checkpoint directories come from the command line only
            continue
        text = environ.get(ENV_PREFIX + field.name.upper())
        if text is None and field.name == "token":
            text = environ.get(TOKEN_ENV)
        if text is not None and text != "":
            try:
                values[field.name] = _parse_env(field, text)
            except ValueError as e:
                raise SettingsError(f"{ENV_PREFIX}{field.name.upper()}={text!r}: {e}") from None
    # Build without validation: the host/token check must see the final, merged values.
    defaults = object.__new__(ServeSettings)
    for field in dataclasses.fields(ServeSettings):
        object.__setattr__(defaults, field.name, values.get(field.name, field.default))
    return defaults


def parse(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> ServeSettings:
    """Settings from the command line over the environment; SettingsError on a bad combination."""
    defaults = defaults_from_env(environ)
    settings = tyro.cli(ServeSettings, args=argv, default=defaults, prog="mqe-serve",
                        description="Serve MQE / GCBC / GCIQL checkpoints over HTTP (wire protocol v1).")
    # tyro builds the instance with the merged values, so __post_init__ has already checked them.
    return settings
