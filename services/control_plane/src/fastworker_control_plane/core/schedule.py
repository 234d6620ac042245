"""The scheduler heap: task ids waiting for a time (a delayed task's ETA, a retry's
backoff), earliest first.

Entries are ``(due, sequence, task_id)``; the sequence keeps equal times in the order
they were scheduled. Removal is lazy, as in the priority queues: a cancelled task's entry
stays until it comes up and is then skipped by the caller's predicate.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class Schedule:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str]] = []
        self._sequence = itertools.count()

    def push(self, due: float, task_id: str) -> None:
        heapq.heappush(self._heap, (due, next(self._sequence), task_id))

    def pop_due(self, now: float, is_waiting: Callable[[str], bool]) -> list[str]:
        """Every waiting id due at or before ``now``, in due order."""
        due = []
        while self._heap and self._heap[0][0] <= now:
            _, _, task_id = heapq.heappop(self._heap)
            if is_waiting(task_id):
                due.append(task_id)
        return due

    def next_due(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)
