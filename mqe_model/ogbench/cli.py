"""`mqe-ogbench`: the paper's OGBench rows reproduced, from generated data to the results table.

    mqe-ogbench data scene-play-v0 --out-dir data/ogbench          # OGBench's dataset, generated here
    mqe-ogbench train scene-play-v0 --agent mqe --seeds 0 1 2 3 --vmap-seeds   # train, evaluate, score
    mqe-ogbench eval runs/ogbench/scene-play-v0/mqe/seeds0-3       # score saved checkpoints again
    mqe-ogbench table runs/ogbench                                 # the rows as one Markdown table

`python -m mqe_model.ogbench ...` is the same command. Bad input: one line, exit 2.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from typing import Annotated, Any, Union

import tyro

from mqe_model.ogbench import evaluate, generate, reproduce, table

# subcommand -> (its config, what runs it: run(config, command line) -> exit code)
SUBCOMMANDS: dict[str, tuple[type, Callable[[Any, str], int]]] = {
    "data": (generate.GenerateConfig, generate.run),
    "train": (reproduce.ReproduceConfig, reproduce.run),
    "eval": (evaluate.EvalConfig, evaluate.run),
    "table": (table.TableConfig, table.run),
}
Command = Union[tuple(Annotated[config, tyro.conf.subcommand(name)]  # noqa: UP007 - built from the table
                      for name, (config, _) in SUBCOMMANDS.items())]
# Raised while tyro builds a config (each config's __post_init__ checks its own flags).
BAD_INPUT = (generate.GenerateError, reproduce.ReproduceError, evaluate.EvalError)


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (2 for bad input or a failed run)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        cfg = tyro.cli(Command, args=args, prog="mqe-ogbench")
    except BAD_INPUT as e:
        print(f"mqe-ogbench {args[0]}: error: {e}", file=sys.stderr)
        return 2
    run = next(run for config, run in SUBCOMMANDS.values() if type(cfg) is config)
    return run(cfg, shlex.join(["mqe-ogbench", *args]))
