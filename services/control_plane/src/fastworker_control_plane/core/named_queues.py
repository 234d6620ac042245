"""Named queues: one ``PriorityQueues`` per queue name, which queues are paused, and the
tasks set aside (*parked*) while their concurrency key is at its limit. No I/O.

A parked task is still queued (it counts in its queue's depth and keeps its place number),
but it is out of its line, so it never holds back the tasks behind it. When a task of the
same key lets go, the first parked one goes back to the head of its line, where its
number puts it (it was taken from the head).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Collection

from fastworker_control_plane.core.queues import IsQueued, PriorityQueues
from fastworker_control_plane.core.records import TaskRecord
from fastworker_protocol import Priority

ParkKey = tuple[str, bytes]  # (task name, concurrency key value)


class NamedQueues:
    def __init__(self) -> None:
        self._lines: dict[str, PriorityQueues] = {}
        self.paused: set[str] = set()
        self._parked: dict[ParkKey, OrderedDict[str, TaskRecord]] = {}  # in the order parked
        self._parked_at: dict[str, ParkKey] = {}  # task id -> where it is parked
        self._parked_depth: Counter[tuple[str, Priority]] = Counter()
        self._size = 0  # queued tasks, parked ones included (``len``, asked every round)

    def line(self, queue: str) -> PriorityQueues | None:
        return self._lines.get(queue)

    def names(self) -> Collection[str]:
        """Every queue that has had a task."""
        return self._lines.keys()

    def _line(self, queue: str) -> PriorityQueues:
        line = self._lines.get(queue)
        if line is None:
            line = self._lines[queue] = PriorityQueues()
        return line

    def push(self, record: TaskRecord, *, front: bool = False) -> int:
        self._size += 1
        return self._line(record.queue).push(record.id, record.name, record.priority, front=front)

    def restore(self, record: TaskRecord) -> None:
        self._size += 1
        self._line(record.queue).restore(record.id, record.name, record.priority, record.seq)

    def discard(self, record: TaskRecord) -> None:
        """A queued task leaves without being popped (cancelled, finished elsewhere)."""
        self._size -= 1
        where = self._parked_at.pop(record.id, None)
        if where is not None:
            del self._parked[where][record.id]
            if not self._parked[where]:
                del self._parked[where]
            self._parked_depth[(record.queue, record.priority)] -= 1
            return
        line = self._line(record.queue)
        line.discard(record.priority, record.name)
        self._forget_if_empty(record.queue, line)

    def pop(self, queue: str, is_queued: IsQueued, names: Collection[str]) -> str | None:
        line = self._lines.get(queue)
        if line is None:
            return None
        task_id = line.pop(is_queued, names)
        if task_id is not None:
            self._size -= 1
        self._forget_if_empty(queue, line)
        return task_id

    def _forget_if_empty(self, queue: str, line: PriorityQueues) -> None:
        """Drop a line with nothing live left (its skipped ids with it): queue names come
        from clients, so lines must not outlive their tasks."""
        if not len(line):
            del self._lines[queue]

    # --- parking -----------------------------------------------------------------------------

    def park(self, record: TaskRecord, key: bytes) -> None:
        """Set aside a task popped while its concurrency key is at its limit."""
        where = (record.name, key)
        self._parked.setdefault(where, OrderedDict())[record.id] = record
        self._parked_at[record.id] = where
        self._size += 1
        self._parked_depth[(record.queue, record.priority)] += 1

    def unpark(self, name: str, key: bytes | None, is_queued: IsQueued) -> int:
        """Put the first parked task of ``(name, key)`` back at the head of its line (all
        of ``name``'s with ``key=None``, after a limit changed); returns how many."""
        keys = [k for k in self._parked if k[0] == name] if key is None else [(name, key)]
        moved = 0
        for where in keys:
            parked = self._parked.get(where, OrderedDict())
            while parked and not (key is not None and moved):
                task_id, record = parked.popitem(last=False)
                del self._parked_at[task_id]
                self._parked_depth[(record.queue, record.priority)] -= 1
                self._size -= 1
                if is_queued(task_id):
                    self.restore(record)
                    moved += 1
            if not parked:
                self._parked.pop(where, None)
        return moved

    def parked(self, queue: str | None = None) -> list[TaskRecord]:
        return [
            r
            for parked in self._parked.values()
            for r in parked.values()
            if queue is None or r.queue == queue
        ]

    # --- depths ------------------------------------------------------------------------------

    def queue_depth(self, queue: str, priority: Priority) -> int:
        line = self._lines.get(queue)
        queued = 0 if line is None else line.depth(priority)
        return queued + self._parked_depth[(queue, priority)]

    def depth(self, priority: Priority) -> int:
        parked = sum(n for (_, p), n in self._parked_depth.items() if p == priority)
        return sum(line.depth(priority) for line in self._lines.values()) + parked

    def __len__(self) -> int:
        return self._size
