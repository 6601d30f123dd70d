"""What MQE's backup aims at on lights out, computed exactly: no network, no training.

Without the action invariance, MQE's multistep LINEX backup has the data's own successor distance as its
fixed point (the paper's theorem bounds the learned distance by it), and on lights out with random presses
that distance is known in closed form (`LightsOut.successor_distance`). This asks two things of it, per
discount: does its greedy press (the press whose next pattern it puts nearest the goal) walk a shortest
path, and how flat is it in the backup's own units (nats: steps x -log(gamma)) beyond a few presses, where
a learned critic must tell far goals apart (ogbench.md section 35):

    python -m mqe_model.toy.successor --side 4 --gammas 0.8 0.95 0.995
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import tyro

from mqe_model.toy.lights_out import LightsOut


@dataclasses.dataclass(frozen=True)
class SuccessorConfig:
    """Tabulate the random-press data's exact successor distance against the fewest presses."""

    side: int = 4  # board side: 4 is puzzle-4x4, 3 has one press set per pattern
    gammas: tuple[float, ...] = (0.8, 0.95, 0.995)  # discounts per press to tabulate (the toy's is 0.95, OGBench's 0.995)

    def __post_init__(self) -> None:
        if not 2 <= self.side <= 4:
            raise ValueError(f"side {self.side}: must be 2, 3 or 4")
        if not self.gammas or not all(0.0 < g < 1.0 for g in self.gammas):
            raise ValueError(f"gammas {self.gammas}: give at least one discount, each in (0, 1)")


@dataclasses.dataclass(frozen=True)
class SuccessorShape:
    """The successor distance at one discount, read against the fewest presses."""

    gamma: float  # discount per press
    spearman: float  # rank correlation with the fewest presses over every reachable pattern but the goal's own
    nats_by_presses: dict[int, float]  # mean distance in nats (the backup's units) per press count, from 1
    far_spread: float  # (nats at the most presses - nats at 3 presses) / nats at the most: how little far goals differ
    greedy_shortest: float  # fraction of reachable patterns whose greedy press takes one press off the fewest


def greedy_presses(board: LightsOut, table: np.ndarray, patterns: np.ndarray) -> np.ndarray:
    """For each pattern x (the lights that still differ from the goal), the button whose press leaves the
    pattern with the smallest `table` value: the greedy read-out of a distance that depends on s XOR g."""
    after = np.asarray(patterns)[:, None] ^ board.masks[None, :]
    return np.argmin(table[after], axis=1)


def successor_shape(board: LightsOut, gamma: float) -> SuccessorShape:
    """The exact successor distance of random presses at `gamma`, against the fewest presses."""
    from scipy.stats import spearmanr

    steps = board.successor_distance(gamma)
    patterns = board.reachable[board.reachable != 0]
    presses = board.presses[patterns]
    nats = steps[patterns] * -np.log(gamma)
    by_presses = {int(p): float(nats[presses == p].mean()) for p in np.unique(presses)}
    most = max(by_presses)
    chosen = patterns ^ board.masks[greedy_presses(board, steps, patterns)]
    return SuccessorShape(
        gamma=gamma,
        spearman=float(spearmanr(steps[patterns], presses).statistic),
        nats_by_presses=by_presses,
        far_spread=(by_presses[most] - by_presses[min(3, most)]) / by_presses[most],
        greedy_shortest=float(np.mean(board.presses[chosen] == presses - 1)),
    )


def main() -> None:
    """CLI: one line per discount, then all of them as JSON."""
    config = tyro.cli(SuccessorConfig)
    board = LightsOut(config.side)
    shapes = [successor_shape(board, gamma) for gamma in config.gammas]
    for shape in shapes:
        print(f"{config.side}x{config.side} gamma {shape.gamma:g}: Spearman {shape.spearman:.3f}; nats by presses "
              + " ".join(f"{p}: {v:.2f}" for p, v in shape.nats_by_presses.items())
              + f"; far spread {shape.far_spread:.3f}; greedy press on a shortest path from {shape.greedy_shortest:.3f}"
              " of patterns")
    print(json.dumps([dataclasses.asdict(shape) for shape in shapes]))


if __name__ == "__main__":
    main()
