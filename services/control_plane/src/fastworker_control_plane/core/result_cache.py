"""LRU cache of final task results with a time-to-live.

Entries expire ``ttl`` seconds after they are stored; reading one refreshes its LRU
position but not its expiry (a result is kept for a fixed time after the task finished,
however often it is read).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")

DEFAULT_MAX_SIZE = 10_000
DEFAULT_TTL = 3600.0


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    expirations: int = 0


class ResultCache(Generic[V]):
    def __init__(self, max_size: int = DEFAULT_MAX_SIZE, ttl: float = DEFAULT_TTL) -> None:
        if max_size <= 0:
            raise ValueError("max_size must be positive")
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.max_size = max_size
        self.ttl = ttl
        self.stats = CacheStats()
        self._entries: OrderedDict[str, tuple[float, V]] = OrderedDict()

    def put(self, key: str, value: V, now: float) -> None:
        self._entries[key] = (now + self.ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_size:
            self._entries.popitem(last=False)
            self.stats.evictions += 1

    def get(self, key: str, now: float) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            self.stats.misses += 1
            return None
        expires_at, value = entry
        if expires_at <= now:
            del self._entries[key]
            self.stats.expirations += 1
            self.stats.misses += 1
            return None
        self._entries.move_to_end(key)
        self.stats.hits += 1
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def peek(self, key: str, now: float) -> V | None:
        """Read without touching LRU order or statistics."""
        entry = self._entries.get(key)
        return entry[1] if entry is not None and entry[0] > now else None

    def values(self, now: float) -> list[V]:
        """Live values, most recently stored or read last."""
        return [v for exp, v in self._entries.values() if exp > now]

    def sweep(self, now: float) -> int:
        """Drop every expired entry; returns how many."""
        expired = [k for k, (exp, _) in self._entries.items() if exp <= now]
        for k in expired:
            del self._entries[k]
        self.stats.expirations += len(expired)
        return len(expired)

    def __len__(self) -> int:
        return len(self._entries)
