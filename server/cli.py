"""`mqe-serve` (also `python -m server`): serve checkpoints over HTTP.

    mqe-serve                                                       # the bundled demo policy, as 'demo'
    mqe-serve --policy mqe=runs/mqe/checkpoints                     # loopback, port 8000
    mqe-serve --policy mqe=runs/mqe --host 0.0.0.0 --token "$TOKEN"  # the lab network
    MQE_SERVE_PORT=9000 mqe-serve --policy mqe=runs/mqe             # settings from the environment

Bad settings end with one line saying what to fix, and exit code 2.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys

from server.settings import ServeSettings, SettingsError, parse

logger = logging.getLogger(__name__)

GRAPH_MIN_SIZE_FLAG = "--xla_gpu_graph_min_graph_size"  # the fewest kernels XLA puts in one CUDA graph
CUDA_GRAPH_MIN_SIZE = 1  # every run of kernels a CUDA graph: the twin matmul act at 5 Hz 0.84x XLA's default (5) on an H200


def xla_flags(current: str) -> str:
    """The XLA_FLAGS the server runs with: `current` (the environment's) and `CUDA_GRAPH_MIN_SIZE`,
    unless `current` sets that size itself. XLA's default leaves runs of fewer than 5 kernels outside
    CUDA graphs, each kernel its own launch; at 1 on an H200 one robot's served round trip was 0.93x
    and 100 robots' p99 7.72 against 11.39 ms (docs/performance.md, `benchmarks/act_latency.py`). The
    CPU ignores it. XLA reads the flags when its first backend starts: set them before that."""
    if GRAPH_MIN_SIZE_FLAG in current:
        return current
    return f"{current} {GRAPH_MIN_SIZE_FLAG}={CUDA_GRAPH_MIN_SIZE}".strip()


def configure_jax(settings: ServeSettings) -> None:
    """XLA's flags (before any backend starts) and the persistent compilation cache (restarts load
    compiled code instead of compiling again)."""
    os.environ["XLA_FLAGS"] = xla_flags(os.environ.get("XLA_FLAGS", ""))
    logger.info("XLA_FLAGS: %s", os.environ["XLA_FLAGS"] or "(none)")
    import jax

    cache = settings.compilation_cache_dir
    if cache is None:
        return
    cache.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(cache))
    # Cache everything: the act functions are small and compile in well under the default 1 s.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    logger.info("JAX compilation cache: %s", cache)


def check_checkpoints(settings: ServeSettings) -> None:
    """Fail fast (before binding the port) on a checkpoint that cannot be found or read."""
    from mqe_model import checkpoints

    for name, path in settings.policies.items():
        try:
            checkpoints.read_metadata(checkpoints.resolve_step_dir(path))
        except checkpoints.CheckpointError as e:
            raise SettingsError(f"--policy {name}={path}: {e}") from None


def with_demo_policy(settings: ServeSettings) -> ServeSettings:
    """Settings without any --policy serve the bundled demo checkpoint as 'demo'."""
    from mqe_model import demo

    try:
        step_dir = demo.demo_step_dir()
    except demo.DemoCheckpointMissing as e:
        raise SettingsError("no --policy given: pass --policy NAME=CHECKPOINT_DIR (a step directory, a "
                            f"checkpoints root or a training workdir); {e}") from None
    return dataclasses.replace(settings, policy=(f"{demo.DEMO_POLICY_NAME}={step_dir}",))


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (2 for bad settings)."""
    serving_demo = False
    try:
        settings = parse(argv)
        if not settings.policies:
            settings, serving_demo = with_demo_policy(settings), True
    except SettingsError as e:
        print(f"mqe-serve: error: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("absl").setLevel(logging.WARNING)
    if serving_demo:
        from mqe_model.demo import DEMO_POLICY_NAME

        logger.info("no --policy given: serving the bundled demo policy as '%s' (%s)", DEMO_POLICY_NAME,
                    settings.policies[DEMO_POLICY_NAME])
    configure_jax(settings)
    try:
        check_checkpoints(settings)
    except SettingsError as e:
        print(f"mqe-serve: error: {e}", file=sys.stderr)
        return 2

    import uvicorn

    from server.app import create_app

    app = create_app(settings)
    logger.info("serving %s on http://%s:%d (auth %s)", ", ".join(settings.policies), settings.host,
                settings.port, "on" if settings.token else "off")
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning",
                access_log=False, timeout_keep_alive=30, limit_concurrency=1024)
    return 0


if __name__ == "__main__":
    sys.exit(main())
