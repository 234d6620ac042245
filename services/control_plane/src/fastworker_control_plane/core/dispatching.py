"""One dispatch round: which queued tasks go to which waiting workers. No I/O.

The least-loaded waiting worker with room is served next: from the queues it serves, in
its weighted fair share (``FairShare``), strict priority inside a queue, it takes the
oldest task of the most urgent priority among the names it offers now
(``WorkerSlot.offers``: any of its names into a free slot, only quick ones into its
prefetch buffer) and no limit holds back. A worker that finds nothing leaves the round.

Each queue keeps one line per priority and task name, and only the names a worker offers
are looked up, so a backlog of any size that this worker cannot run (other queues, other
names, names at a limit) is never scanned and never delays its next task. A task whose
concurrency key is at its limit is parked (``NamedQueues.park``), not skipped over again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from fastworker_control_plane.core.dispatch_policy import least_loaded
from fastworker_control_plane.core.effects import Effects
from fastworker_control_plane.core.limits import Limits
from fastworker_control_plane.core.named_queues import NamedQueues
from fastworker_control_plane.core.queues import IsQueued
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.core.workers import WorkerSlot
from fastworker_protocol import Assignment

Assign = Callable[[TaskRecord, WorkerSlot, Effects], None]


@dataclass
class Round:
    queues: NamedQueues
    tasks: Mapping[str, TaskRecord]
    is_queued: IsQueued
    quick: set[str]
    limits: Limits
    now: float
    # Per worker, for the round: the names it offers (until its load crosses a threshold
    # or a name closes) and the served queues that hold tasks.
    _offers: dict[str, frozenset[str]] = field(default_factory=dict)
    _served: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.limited = bool(self.limits)
        self.closed = self.limits.closed_names(self.now) if self.limited else set()

    def next_for(self, slot: WorkerSlot) -> TaskRecord | None:
        """The task ``slot`` takes next, popped from its queue; ``None`` if none."""
        worker_id = slot.worker_id
        names = self._offers.get(worker_id)
        if names is None:
            names = self._offers[worker_id] = slot.offers(self.quick) - self.closed
        if not names:
            return None
        served = self._served.get(worker_id)
        if served is None:
            served = self._served[worker_id] = slot.served(self.queues.names())
        ready = [queue for queue in served if self._open(queue)]
        for queue in slot.share.order(ready) if len(ready) > 1 else ready:
            while (task_id := self.queues.pop(queue, self.is_queued, names)) is not None:
                record = self.tasks[task_id]
                if not self.limited or self.limits.key_open(record):
                    slot.share.served(queue)
                    return record
                self.queues.park(record, self.limits.key_value(record))
        return None

    def _open(self, queue: str) -> bool:
        if queue in self.queues.paused:
            return False
        return not self.limited or self.limits.queue_open(queue, self.now)

    def taken(self, record: TaskRecord, slot: WorkerSlot) -> None:
        """``record`` went to ``slot`` (assigned): the limits count it, and what the
        worker offers may have changed."""
        if len(slot.in_flight) in (slot.concurrency, slot.capacity):
            self._offers.pop(slot.worker_id, None)
        if self.limited:
            self.limits.acquire(record, self.now)
            if self.limits.name_closed(record.name, self.now):
                self.closed.add(record.name)
                self._offers.clear()


def dispatch_round(
    plan_for: Round,
    slots: Mapping[str, WorkerSlot],
    max_batch_bytes: int,
    assign: Assign,
    fx: Effects,
) -> dict[str, list[Assignment]]:
    """Hand queued tasks to the ``slots`` (the workers waiting for work); ``assign``
    records each handoff in ``fx`` (and so changes the worker's load)."""
    waiting = dict(slots)
    plan: dict[str, list[Assignment]] = {}
    plan_bytes: dict[str, int] = {}
    while waiting:
        chosen = least_loaded(slot.load() for slot in waiting.values())
        if chosen is None:
            break
        slot = waiting[chosen]
        record = plan_for.next_for(slot)
        if record is None:
            del waiting[chosen]
            continue
        batch_bytes = plan_bytes.get(chosen, 0) + record.size
        if batch_bytes > max_batch_bytes:  # this worker's reply is full
            plan_for.queues.restore(record)
            del waiting[chosen]
            continue
        plan_bytes[chosen] = batch_bytes
        assign(record, slot, fx)
        plan_for.taken(record, slot)
        plan.setdefault(chosen, []).append(record.assignment())
    return plan
