"""Strict priority queues of task ids: a FIFO per priority, drained most urgent first.

Removal is lazy: a cancelled task stays in its deque and is skipped when popped, so
cancel is O(1). ``pop`` therefore takes a predicate saying whether an id is still queued.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from fastworker_protocol import Priority


class PriorityQueues:
    def __init__(self) -> None:
        self._queues: dict[Priority, deque[str]] = {p: deque() for p in Priority.by_rank()}
        self._depth: dict[Priority, int] = dict.fromkeys(Priority.by_rank(), 0)

    def push(self, task_id: str, priority: Priority, *, front: bool = False) -> None:
        """Queue at the back, or at the front for a task that was already waiting its turn."""
        if front:
            self._queues[priority].appendleft(task_id)
        else:
            self._queues[priority].append(task_id)
        self._depth[priority] += 1

    def discard(self, priority: Priority) -> None:
        """Account for a queued id that will be skipped (cancelled) when popped."""
        self._depth[priority] -= 1

    def pop(self, is_queued: Callable[[str], bool]) -> str | None:
        """The oldest queued id of the most urgent non-empty priority, or ``None``."""
        for priority, queue in self._queues.items():
            while queue:
                task_id = queue.popleft()
                if is_queued(task_id):
                    self._depth[priority] -= 1
                    return task_id
        return None

    def depth(self, priority: Priority) -> int:
        return self._depth[priority]

    def __len__(self) -> int:
        return sum(self._depth.values())
