"""`mqe-demo`: the whole pipeline on the bundled demo policy, in one command, on the twin.

    mqe-demo                                   # 3 trials of single_pnp
    mqe-demo --task double_pnp --trials 5 --seed 7 --out runs/demo
    mqe-demo --task all --trials 15 --policy mqe=runs/mqe --policy gcbc=runs/gcbc   # a results table

It only orchestrates, through processes and HTTP, the commands a user would run by hand:
`mqe-serve` (no --policy: the bundled demo policy; else the given ones) on a free loopback port;
`python robot_client/run.py --robot sim --pace lockstep --no-prompt` (the twin's scorer fills the
sheet); `mqe-report summarize`. The server is stopped at the end, on failure and on Ctrl-C.
Bad input prints one line and exits with code 2.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib.util
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import tyro

from mqe_model import demo

EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED = 2, 1, 130
# The twin's tasks, asked of robot_client in a child process (this package never imports it).
TWIN_TASKS_CODE = "from robot_client.sim.scoring import SCORED_TASKS; print(' '.join(SCORED_TASKS))"


class DemoError(RuntimeError):
    """A step of the demo failed; the message says which and where its log is."""


class Interrupted(Exception):
    """Ctrl-C or SIGTERM: stop the children and exit."""


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    """Serve the bundled demo policy, run scored trials on the MuJoCo twin, write the report."""

    task: str = "single_pnp"  # the twin's task (single/double/triple/quadruple_pnp, open_drawer, open_drawer_place) or 'all'
    trials: int = 3  # trials to run (scene seeds seed, seed + 1, ...)
    seed: int = 0  # scene seed of the first trial
    max_steps: int = 120  # steps per trial (120 at 5 Hz = 24 s of simulated time)
    out: Path = Path("runs/demo")  # each run writes <out>/<timestamp>/ (sheet, trials, report, logs)
    port: int = 0  # server port on 127.0.0.1; 0 picks a free one
    ready_timeout_s: float = 600.0  # s, longest wait for the server's /readyz (compiling on a slow CPU)
    policy: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()  # NAME=CHECKPOINT_DIR, repeatable; none: the bundled demo policy

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise ValueError(f"--trials {self.trials} must be >= 1")
        if self.max_steps < 1:
            raise ValueError(f"--max-steps {self.max_steps} must be >= 1")
        if not 0 <= self.port < 65536:
            raise ValueError(f"--port {self.port} must be 0 (any free port) or a TCP port")
        if self.ready_timeout_s <= 0:
            raise ValueError(f"--ready-timeout-s {self.ready_timeout_s} must be > 0")
        if self.out.exists() and not self.out.is_dir():
            raise ValueError(f"--out {self.out} is a file; give a directory")
        for spec in self.policy:
            name, sep, path = spec.partition("=")
            if not (sep and name and path):
                raise ValueError(f"--policy {spec!r}: expected NAME=CHECKPOINT_DIR, e.g. mqe=runs/mqe")
            if not Path(path).exists():
                raise ValueError(f"--policy {spec}: {path} does not exist")
        names = self.policy_names
        if len(set(names)) != len(names):
            raise ValueError(f"--policy names repeated: {names}")

    @property
    def policy_names(self) -> list[str]:
        """The served policies, in the order their trials run."""
        return [p.partition("=")[0] for p in self.policy] or [demo.DEMO_POLICY_NAME]


def free_port(port: int = 0) -> int:
    """`port` (0: any) if nothing listens on it on loopback right now; ValueError if taken."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            raise ValueError(f"--port {port} is in use on 127.0.0.1: pick another, or 0 for any free one") from None
        return s.getsockname()[1]


def run_dir(out: Path) -> Path:
    """A new directory for this run under `out`, never reused."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H%M%S")
    for n in range(1, 1000):
        path = out / (stamp if n == 1 else f"{stamp}-{n}")
        with contextlib.suppress(FileExistsError):
            path.mkdir(parents=True)
            return path
    raise DemoError(f"cannot create a run directory under {out}")


def robot_client_script() -> Path:
    """robot_client/run.py of this installation (found without importing robot_client)."""
    spec = importlib.util.find_spec("robot_client")
    if spec is None or spec.origin is None:
        raise DemoError("robot_client is not installed: pip install 'mqe-deploy[client,sim]'")
    return Path(spec.origin).parent / "run.py"


def check_task(task: str) -> list[str]:
    """The tasks to run (all of the twin's for 'all'); ValueError unless the twin can set up and score
    `task` (asked of robot_client in a child)."""
    result = subprocess.run([sys.executable, "-c", TWIN_TASKS_CODE], capture_output=True, text=True)
    if result.returncode != 0:
        raise DemoError(f"cannot list the twin's tasks: {(result.stderr.strip().splitlines() or ['?'])[-1]}")
    tasks = result.stdout.split()
    if task == "all":
        return tasks
    if task not in tasks:
        raise ValueError(f"--task {task!r}: the twin has {', '.join(tasks)}, or 'all'")
    return [task]


def _tail(path: Path, lines: int = 1) -> str:
    with contextlib.suppress(OSError):
        text = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
        return " | ".join(text[-lines:])
    return ""


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=2) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError):
        return False


class Server:
    """`mqe-serve` (python -m server; no --policy: the demo) in its own session; always stopped by stop()."""

    def __init__(self, port: int, log: Path, args: Sequence[str] = ()):
        self.port, self.log, self.args = port, log, tuple(args)  # args: more mqe-serve options
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        """Start the process (returns at once)."""
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "server", "--port", str(self.port), *self.args],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout_s: float) -> None:
        """Until /readyz answers 200; DemoError if the process exits or the time runs out."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise DemoError(f"the server exited with code {self.proc.returncode} before it was ready: "
                                f"{_tail(self.log)} (log: {self.log})")
            if _ready(self.url):
                return
            time.sleep(0.1)
        raise DemoError(f"the server was not ready after {timeout_s:g} s (log: {self.log})")

    def stop(self) -> None:
        """SIGTERM (uvicorn shuts down cleanly), then SIGKILL after 15 s; a second Ctrl-C waits."""
        if self.proc is None or self.proc.poll() is not None:
            return
        previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def _run_child(args: list[str], log: Path | None = None) -> int:
    """Run a child in its own session (stdout/stderr to the terminal or `log`); on Ctrl-C, forward it once."""
    with open(log, "w") if log else contextlib.nullcontext() as sink:
        proc = subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT if sink else None,
                                start_new_session=True)
        try:
            return proc.wait()
        except Interrupted:
            proc.send_signal(signal.SIGINT)  # the client records the trial as aborted and stops
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise


def run_demo(cfg: DemoConfig) -> int:
    """Serve, run the trials, report; always stops the server. Returns the exit code."""
    started = time.monotonic()
    if not cfg.policy:
        demo.demo_step_dir()  # one line now, not a failed server later
    tasks = check_task(cfg.task)
    script = robot_client_script()
    port = free_port(cfg.port)
    run = run_dir(cfg.out)
    # one trial at a time: only the batch-1 bucket is compiled, so the server is ready sooner
    server_args = ("--batch-buckets", "1", *(arg for p in cfg.policy for arg in ("--policy", p)))
    server = Server(port, run / "server.log", server_args)
    what = ", ".join(cfg.policy) if cfg.policy else "the bundled demo policy"
    print(f"mqe-demo: serving {what} on {server.url} (log: {server.log})", flush=True)
    server.start()
    try:
        return _serve_and_run(cfg, tasks, started, server, script, run)
    except Interrupted:
        server.stop()
        print(f"mqe-demo: interrupted; the server is stopped; what was recorded is in {run}", file=sys.stderr)
        return EXIT_INTERRUPTED


def _serve_and_run(cfg: DemoConfig, tasks: list[str], started: float, server: Server, script: Path,
                   run: Path) -> int:
    sheet, report = run / "sheet.csv", run / "report"
    try:
        server.wait_ready(cfg.ready_timeout_s)
        ready_s = time.monotonic() - started
        print(f"mqe-demo: server ready in {ready_s:.1f} s; {cfg.trials} trial(s) of {', '.join(tasks)} "
              f"on the twin", flush=True)
        for policy in cfg.policy_names:
            for task in tasks:
                code = _run_child([
                    sys.executable, str(script), "--task", task, "--robot", "sim", "--pace", "lockstep",
                    "--no-prompt", "--trials", str(cfg.trials), "--seed", str(cfg.seed), "--max-steps",
                    str(cfg.max_steps), "--server", server.url, "--policy", policy, "--out", str(run),
                    "--sheet", str(sheet), "--operator", "mqe-demo"])
                if code != 0:
                    raise DemoError(f"the robot client exited with code {code} on {policy}/{task} "
                                    "(its messages are above)")
        trials_s = time.monotonic() - started - ready_s
    finally:
        server.stop()
    if not sheet.is_file():
        raise DemoError(f"no trial was scored: {sheet} is missing")
    code = _run_child([sys.executable, "-m", "eval_protocols", "summarize", str(sheet), "--out", str(report)],
                      log=run / "report.log")
    if code != 0:
        raise DemoError(f"mqe-report summarize exited with code {code}: {_tail(run / 'report.log')}")
    total = time.monotonic() - started
    lines = [f"mqe-demo: done in {total:.1f} s (server start {ready_s:.1f} s, trials {trials_s:.1f} s)",
             f"  sheet:  {sheet}"]
    for policy in cfg.policy_names:
        for task in tasks:
            trial_dirs = sorted((p for p in run.glob(f"*/{policy}/{task}/trial_*") if p.is_dir()),
                                key=lambda p: int(p.name.removeprefix("trial_")))
            where = trial_dirs[0].parent if trial_dirs else run
            lines.append(f"  trials: {where} ({', '.join(p.name for p in trial_dirs)})")
    lines.append(f"  report: {report / 'summary.md'}")
    print("\n".join(lines), flush=True)
    return 0


def _interrupt(signum, frame) -> None:
    raise Interrupted


def main(argv: list[str] | None = None) -> int:
    """Console entry point (`mqe-demo`)."""
    cfg = tyro.cli(DemoConfig, args=argv, prog="mqe-demo")
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return run_demo(cfg)
    except (ValueError, demo.DemoCheckpointMissing) as e:
        print(f"mqe-demo: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (DemoError, OSError) as e:
        print(f"mqe-demo: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    except Interrupted:
        print("mqe-demo: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


if __name__ == "__main__":
    sys.exit(main())
