"""Episode log: one info line when a robot's episode starts and one when it goes quiet.

Clients send `episode_id` with every /v1/act; the server has no 'episode ended' message, so an
episode that has had no request for `idle_s` is reported as ended (with its step count and times).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

logger = logging.getLogger(__name__)

MAX_TRACKED = 10_000  # episodes tracked at once; beyond that the oldest are reported and dropped


@dataclasses.dataclass
class _Episode:
    policy: str
    started: float
    last: float
    steps: int = 0
    total_ms: float = 0.0
    max_total_ms: float = 0.0


class EpisodeLog:
    """Tracks live episodes; thread-safe."""

    def __init__(self, idle_s: float = 30.0):
        self.idle_s = idle_s
        self._episodes: dict[str, _Episode] = {}
        self._lock = threading.Lock()
        self._last_sweep = time.monotonic()

    def record(self, episode_id: str | None, policy: str, total_ms: float) -> None:
        """Count one answered step of `episode_id` (None: not part of an episode)."""
        now = time.monotonic()
        if episode_id is not None:
            with self._lock:
                episode = self._episodes.get(episode_id)
                if episode is None:
                    episode = self._episodes[episode_id] = _Episode(policy, now, now)
                    logger.info("episode %s started (policy %s)", episode_id, policy)
                episode.last = now
                episode.steps += 1
                episode.total_ms += total_ms
                episode.max_total_ms = max(episode.max_total_ms, total_ms)
                if len(self._episodes) > MAX_TRACKED:
                    oldest = min(self._episodes, key=lambda k: self._episodes[k].last)
                    self._end(oldest, "dropped (too many live episodes)")
        if now - self._last_sweep > 1.0:
            self.sweep(now)

    def sweep(self, now: float | None = None) -> None:
        """Report and forget the episodes idle for longer than `idle_s`."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._last_sweep = now
            for episode_id in [k for k, e in self._episodes.items() if now - e.last > self.idle_s]:
                self._end(episode_id, "ended")

    def close(self) -> None:
        """Report every live episode (at shutdown)."""
        with self._lock:
            for episode_id in list(self._episodes):
                self._end(episode_id, "open at shutdown")

    def _end(self, episode_id: str, how: str) -> None:
        e = self._episodes.pop(episode_id)
        logger.info("episode %s %s: policy %s, %d steps over %.1f s, server time mean %.2f ms max %.2f ms",
                    episode_id, how, e.policy, e.steps, e.last - e.started,
                    e.total_ms / max(e.steps, 1), e.max_total_ms)
