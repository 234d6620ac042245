"""Strict priority queues of task ids: per priority, one FIFO per task name.

Dispatch asks for the most urgent, oldest task among the names some waiting worker can
run, so a backlog of any size for busy workers never delays a task an idle worker could
start: tasks are looked up by name, never scanned past.

Every queued id carries a sequence number: its place in its priority. Pushing at the
back takes the next number up, pushing at the front (a task that was already waiting its
turn) the next one down, so one number orders a priority's tasks across all names, and
the journal keeps it so a restart restores the order exactly.

Removal is lazy: a cancelled task stays in its FIFO and is skipped when it reaches the
head, so cancel is O(1). ``pop`` therefore takes a predicate saying whether an id is
still queued.
"""

from __future__ import annotations

from bisect import insort
from collections import deque
from collections.abc import Callable, Collection

from fastworker_protocol import Priority

IsQueued = Callable[[str], bool]


class PriorityQueues:
    def __init__(self) -> None:
        self._fifos: dict[Priority, dict[str, deque[tuple[int, str]]]] = {
            p: {} for p in Priority.by_rank()
        }
        self._depth: dict[Priority, int] = dict.fromkeys(Priority.by_rank(), 0)
        self.per_name: dict[str, int] = {}  # live tasks queued, per task name
        self._back = 0  # the last sequence number given at the back
        self._front = 0  # the last one given at the front

    def push(self, task_id: str, name: str, priority: Priority, *, front: bool = False) -> int:
        """Queue at the back, or at the front for a task that was already waiting its
        turn; returns the task's sequence number."""
        fifos = self._fifos[priority]
        fifo = fifos.get(name)
        if fifo is None:
            fifo = fifos[name] = deque()
        if front:
            self._front -= 1
            fifo.appendleft((self._front, task_id))
            seq = self._front
        else:
            self._back += 1
            fifo.append((self._back, task_id))
            seq = self._back
        self._depth[priority] += 1
        self.per_name[name] = self.per_name.get(name, 0) + 1
        return seq

    def restore(self, task_id: str, name: str, priority: Priority, seq: int) -> None:
        """Queue a task at the place ``seq`` it had before a restart."""
        fifo = self._fifos[priority].setdefault(name, deque())
        if not fifo or fifo[-1][0] < seq:
            fifo.append((seq, task_id))
        elif seq < fifo[0][0]:  # a task taken from the head and put back
            fifo.appendleft((seq, task_id))
        else:
            insort(fifo, (seq, task_id))
        self._back, self._front = max(self._back, seq), min(self._front, seq)
        self._depth[priority] += 1
        self.per_name[name] = self.per_name.get(name, 0) + 1

    def discard(self, priority: Priority, name: str) -> None:
        """Account for a queued id that will be skipped (cancelled) when popped."""
        self._depth[priority] -= 1
        self._uncount(name)

    def _uncount(self, name: str) -> None:
        left = self.per_name[name] - 1
        if left:
            self.per_name[name] = left
        else:
            del self.per_name[name]

    def pop(self, is_queued: IsQueued, names: Collection[str] | None = None) -> str | None:
        """The oldest queued id of the most urgent priority among tasks named in
        ``names`` (every name if ``None``), or ``None``."""
        for priority, fifos in self._fifos.items():
            if not self._depth[priority]:  # nothing live there (dead ids are skipped anyway)
                continue
            best: deque[tuple[int, str]] | None = None
            best_name = ""
            for name in _candidates(fifos, names):
                fifo = self._head(fifos, name, is_queued)
                if fifo is not None and (best is None or fifo[0][0] < best[0][0]):
                    best, best_name = fifo, name
            if best is not None:
                self._depth[priority] -= 1
                self._uncount(best_name)
                return best.popleft()[1]
        return None

    def ids(self) -> list[str]:
        """Every id queued (cancelled ones not yet skipped included)."""
        return [
            task_id for fifos in self._fifos.values() for f in fifos.values() for _, task_id in f
        ]

    def heads(self) -> list[str]:
        """The first id of each task name's line at each priority."""
        return [f[0][1] for fifos in self._fifos.values() for f in fifos.values() if f]

    @staticmethod
    def _head(
        fifos: dict[str, deque[tuple[int, str]]], name: str, is_queued: IsQueued
    ) -> deque[tuple[int, str]] | None:
        """The name's FIFO with a live task at its head (dead heads dropped), or ``None``."""
        fifo = fifos.get(name)
        while fifo:
            if is_queued(fifo[0][1]):
                return fifo
            fifo.popleft()
        if fifo is not None:
            del fifos[name]
        return None

    def depth(self, priority: Priority) -> int:
        return self._depth[priority]

    def __len__(self) -> int:
        return sum(self._depth.values())


def _candidates(
    fifos: dict[str, deque[tuple[int, str]]], names: Collection[str] | None
) -> list[str]:
    """The names to look at: the fewer of the queued names and the wanted ones."""
    if names is None or len(fifos) <= len(names):
        return [n for n in fifos if names is None or n in names]
    return [n for n in names if n in fifos]
