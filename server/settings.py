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
import os
from pathlib import Path
from typing import Annotated

import tyro

DEFAULT_BUCKETS = (1, 2, 4, 8, 16, 32)
ENV_PREFIX = "MQE_SERVE_"
TOKEN_ENV = "MQE_SERVER_TOKEN"
POLICY_ENV = ENV_PREFIX + "POLICY"  # read by nobody: checkpoints come from the command line only
LOOPBACK_NAMES = ("localhost",)


class SettingsError(ValueError):
    """A bad setting or combination; the message says which and how to fix it."""


@dataclasses.dataclass(frozen=True)
class ServeSettings:
    """Inference server configuration (docs/serving.md, 'Settings'): what an operator sets. How a step
    runs on the device is fixed at its measured best, not set here (`server.runtime.encoders_on`,
    `conv_on`, `MAX_PIXELS`; `server.cli.xla_flags`)."""

    policy: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()  # NAME=CHECKPOINT_DIR, repeatable; a step dir, checkpoints root or workdir
    default_policy: str | None = None  # policy used when a request names none (needed with several)
    host: str = "127.0.0.1"  # address to bind; anything but loopback needs --token or --insecure
    port: int = 8000  # TCP port
    token: str | None = dataclasses.field(default=None, repr=False)  # bearer token clients must send (also env MQE_SERVER_TOKEN)
    insecure: bool = False  # allow a non-loopback --host without a token (trusted networks only)
    max_body_bytes: int = 8 * 2**20  # larger request bodies get 413
    batch_buckets: tuple[int, ...] = DEFAULT_BUCKETS  # batch sizes compiled at load; requests pad up
    max_wait_ms: float = 2.0  # longest a request waits for others to fill its micro-batch
    goal_cache_size: int = 4096  # goals kept (least recently used evicted first)
    compilation_cache: str = "~/.cache/mqe-deploy/jax"  # persistent JAX compilation cache; "" disables
    episode_idle_s: float = 30.0  # an episode without requests for this long is logged as ended
    log_level: str = "info"  # debug logs one line per request; info one per episode

    def __post_init__(self) -> None:
        problems = []
        if not 0 < self.port < 65536:
            problems.append(f"--port {self.port} is not a TCP port (1..65535)")
        if self.max_body_bytes < 1024:
            problems.append(f"--max-body-bytes {self.max_body_bytes} is below 1024")
        if not self.batch_buckets or any(b < 1 for b in self.batch_buckets):
            problems.append(f"--batch-buckets {self.batch_buckets} must be positive sizes")
        if self.max_wait_ms < 0:
            problems.append("--max-wait-ms must be >= 0")
        if self.goal_cache_size < 1:
            problems.append("--goal-cache-size must be >= 1")
        if self.log_level.lower() not in ("debug", "info", "warning", "error"):
            problems.append(f"--log-level {self.log_level!r}: choose debug, info, warning or error")
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
