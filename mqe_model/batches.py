"""Host-side batch production with prefetch: sampling in threads, device transfer ahead of use.

The batch for update t depends only on (seed, t, host), never on earlier draws, so a resumed run
sees exactly the batches the uninterrupted run would have seen, however updates are grouped into
dispatches.
"""

from __future__ import annotations

import collections
import concurrent.futures
from collections.abc import Iterator
from typing import Any, Protocol

import jax
import numpy as np

from mqe_model.parallel import DataParallel


class Sampler(Protocol):
    """Anything with `sample(rng, batch_size) -> dict of arrays`."""

    def sample(self, rng: np.random.Generator, batch_size: int) -> dict[str, np.ndarray]: ...


def plan_chunks(start: int, end: int, per_dispatch: int, boundaries: tuple[int, ...]) -> list[tuple[int, int]]:
    """Split updates [start, end) into dispatches of at most `per_dispatch`, cut at every
    multiple of each value in `boundaries` (checkpoint steps), so saves land on exact steps."""
    chunks, step = [], start
    while step < end:
        stop = min(end, step + per_dispatch)
        for every in boundaries:
            if every > 0:
                stop = min(stop, (step // every + 1) * every)
        chunks.append((step, stop))
        step = stop
    return chunks


class BatchStream:
    """Yields (start, end, device batches with a leading axis of end - start updates)."""

    def __init__(self, sampler: Sampler, batch_size: int, seed: int, num_seeds: int,
                 parallel: DataParallel, workers: int = 2, depth: int = 2):
        self.sampler = sampler
        self.local_batch = parallel.local_batch_size(batch_size)
        self.seed = seed
        self.num_seeds = num_seeds
        self.parallel = parallel
        self.workers = max(1, workers)
        self.depth = max(1, depth)

    def sample_step(self, step: int) -> dict[str, np.ndarray]:
        """This host's batch for update `step` (seeds stacked on axis 0 when training several)."""
        rng = np.random.default_rng([self.seed, step, jax.process_index()])
        if self.num_seeds == 1:
            return self.sampler.sample(rng, self.local_batch)
        per_seed = [self.sampler.sample(rng, self.local_batch) for _ in range(self.num_seeds)]
        return {k: np.stack([b[k] for b in per_seed]) for k in per_seed[0]}

    def _make_chunk(self, start: int, end: int) -> dict[str, jax.Array]:
        steps = [self.sample_step(t) for t in range(start, end)]
        stacked = {k: np.stack([b[k] for b in steps]) for k in steps[0]}
        batch_axis = 1 if self.num_seeds == 1 else 2
        return self.parallel.put_batches(stacked, batch_axis)

    def __call__(self, chunks: list[tuple[int, int]]) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """Produce the chunks in order, `workers` threads sampling up to `depth` chunks ahead."""
        with concurrent.futures.ThreadPoolExecutor(self.workers, "batches") as pool:
            pending: collections.deque = collections.deque()
            todo = iter(chunks)
            for start, end in todo:
                pending.append((start, end, pool.submit(self._make_chunk, start, end)))
                if len(pending) > self.depth:
                    break
            while pending:
                start, end, future = pending.popleft()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append((*nxt, pool.submit(self._make_chunk, *nxt)))
                yield start, end, future.result()
