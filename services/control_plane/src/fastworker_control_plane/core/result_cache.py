"""LRU cache of final task results with a time-to-live, bounded by entries and by bytes.

Entries expire ``ttl`` seconds after they are stored (or their own ``ttl``, given to
``put``: a task's ``result_ttl``; ``0`` stores nothing); reading one refreshes its LRU
position but not its expiry (a result is kept for a fixed time after the task finished,
however often it is read).

The cache does not know what its values are: the caller says how many bytes each one
takes at ``put`` (the control plane passes its encoded size). Past either bound the least
recently used entries go first, but the newest entry is always kept, even one larger
than ``max_bytes`` on its own: a result that was just stored can be read at least once.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

V = TypeVar("V")

DEFAULT_MAX_SIZE = 10_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_TTL = 3600.0


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    expirations: int = 0


class _Entry(NamedTuple, Generic[V]):
    expires_at: float
    value: V
    size: int


class ResultCache(Generic[V]):
    def __init__(
        self,
        max_size: int = DEFAULT_MAX_SIZE,
        ttl: float = DEFAULT_TTL,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if max_size <= 0:
            raise ValueError("max_size must be positive")
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.max_size = max_size
        self.max_bytes = max_bytes
        self.ttl = ttl
        self.stats = CacheStats()
        self.bytes = 0  # the sizes given to ``put`` of the entries held
        self._entries: OrderedDict[str, _Entry[V]] = OrderedDict()

    def put(self, key: str, value: V, now: float, size: int = 0, ttl: float | None = None) -> None:
        """Store ``value`` (``size`` bytes, as the caller counts them) as the newest entry,
        for ``ttl`` seconds (the cache's own when ``None``; ``0``: not stored at all, and
        an entry the key had is dropped)."""
        if size < 0:
            raise ValueError("size must be >= 0")
        if ttl is not None and ttl < 0:
            raise ValueError("ttl must be >= 0")
        self._drop(key)
        if ttl == 0:
            return
        self._entries[key] = _Entry(now + (self.ttl if ttl is None else ttl), value, size)
        self.bytes += size
        while len(self._entries) > 1 and (
            len(self._entries) > self.max_size or self.bytes > self.max_bytes
        ):
            _, oldest = self._entries.popitem(last=False)
            self.bytes -= oldest.size
            self.stats.evictions += 1

    def get(self, key: str, now: float) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            self.stats.misses += 1
            return None
        if entry.expires_at <= now:
            self._drop(key)
            self.stats.expirations += 1
            self.stats.misses += 1
            return None
        self._entries.move_to_end(key)
        self.stats.hits += 1
        return entry.value

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def peek(self, key: str, now: float) -> V | None:
        """Read without touching LRU order or statistics."""
        entry = self._entries.get(key)
        return entry.value if entry is not None and entry.expires_at > now else None

    def values(self, now: float) -> list[V]:
        """Live values, most recently stored or read last."""
        return [e.value for e in self._entries.values() if e.expires_at > now]

    def sweep(self, now: float) -> int:
        """Drop every expired entry; returns how many."""
        expired = [k for k, e in self._entries.items() if e.expires_at <= now]
        for k in expired:
            self._drop(k)
        self.stats.expirations += len(expired)
        return len(expired)

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.bytes -= entry.size

    def __len__(self) -> int:
        return len(self._entries)
