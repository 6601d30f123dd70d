"""Goal cache: encoded goals (a policy's goal codes) by random id, bounded by count, least recently used evicted first.

Ids are random (not content hashes) so one client cannot probe for another's goals; the cache lives
in memory, so after a restart every id is unknown and clients upload their goal again.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading

import cachetools
import numpy as np

from mqe_client.protocol import ErrorCode, ProtocolError


@dataclasses.dataclass(frozen=True)
class CachedGoal:
    """One uploaded goal."""

    policy: str  # name of the policy it was preprocessed for
    fingerprint: str  # that policy's fingerprint at upload
    array: np.ndarray  # the goal as the policy's act function takes it


class _CountingLRU(cachetools.LRUCache):
    """cachetools' LRU, counting what it evicts."""

    def __init__(self, maxsize: int):
        super().__init__(maxsize)
        self.evictions = 0

    def popitem(self):
        """Evict the least recently used entry (cachetools calls this when full)."""
        self.evictions += 1
        return super().popitem()


class GoalCache:
    """Thread-safe LRU of `CachedGoal` by goal_id (cachetools' LRUCache under a lock)."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._entries = _CountingLRU(max_entries)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def evictions(self) -> int:
        """Goals dropped to make room since the start."""
        return self._entries.evictions

    def put(self, policy: str, fingerprint: str, array: np.ndarray) -> str:
        """Store a goal; returns its new id."""
        goal_id = secrets.token_urlsafe(16)
        array = np.array(array, copy=True)
        array.setflags(write=False)
        with self._lock:
            self._entries[goal_id] = CachedGoal(policy, fingerprint, array)
        return goal_id

    def get(self, goal_id: str, policy: str) -> np.ndarray:
        """The goal array for `policy`; ProtocolError unknown_goal (404) or invalid_value (422)."""
        with self._lock:
            entry = self._entries.get(goal_id)  # a hit marks the entry most recently used
            if entry is None:
                self.misses += 1
            else:
                self.hits += 1
        if entry is None:
            raise ProtocolError(ErrorCode.UNKNOWN_GOAL,
                                f"goal_id {goal_id!r} is not known (evicted, or the server restarted): "
                                "upload the goal again with POST /v1/goals")
        if entry.policy != policy:
            raise ProtocolError(ErrorCode.INVALID_VALUE,
                                f"goal_id {goal_id!r} was uploaded for policy {entry.policy!r}, not "
                                f"{policy!r}: upload it for this policy")
        return entry.array
