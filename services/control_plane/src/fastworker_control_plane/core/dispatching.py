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
from dataclasses import dataclass

from fastworker_control_plane.core.dispatch_policy import least_loaded
from fastworker_control_plane.core.limits import Limits
from fastworker_control_plane.core.named_queues import NamedQueues
from fastworker_control_plane.core.queues import IsQueued
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.core.workers import WorkerSlot
from fastworker_protocol import Assignment

Assign = Callable[[TaskRecord, WorkerSlot], None]


@dataclass
class Round:
    queues: NamedQueues
    tasks: Mapping[str, TaskRecord]
    is_queued: IsQueued
    quick: set[str]
    limits: Limits
    now: float

    def next_for(self, slot: WorkerSlot, closed: set[str]) -> TaskRecord | None:
        """The task ``slot`` takes next, popped from its queue; ``None`` if none."""
        names = slot.offers(self.quick)
        if not names:
            return None
        if closed and not closed.isdisjoint(names):
            names = names - closed
        ready = [
            queue
            for queue in slot.served(self.queues.names())
            if queue not in self.queues.paused and self.limits.queue_open(queue, self.now)
        ]
        for queue in slot.share.order(ready):
            while (task_id := self.queues.pop(queue, self.is_queued, names)) is not None:
                record = self.tasks[task_id]
                if self.limits.key_open(record):
                    slot.share.served(queue)
                    return record
                self.queues.park(record, self.limits.key_value(record))
        return None


def dispatch_round(
    plan_for: Round,
    slots: Mapping[str, WorkerSlot],
    max_batch_bytes: int,
    assign: Assign,
) -> dict[str, list[Assignment]]:
    """Hand queued tasks to the ``slots`` (the workers waiting for work); ``assign``
    records each handoff (and so changes the worker's load and the limits)."""
    waiting = dict(slots)
    limits, now = plan_for.limits, plan_for.now
    closed = limits.closed_names(now)
    plan: dict[str, list[Assignment]] = {}
    plan_bytes: dict[str, int] = {}
    while waiting:
        chosen = least_loaded(slot.load() for slot in waiting.values())
        if chosen is None:
            break
        slot = waiting[chosen]
        record = plan_for.next_for(slot, closed)
        if record is None:
            del waiting[chosen]
            continue
        batch_bytes = plan_bytes.get(chosen, 0) + record.size
        if batch_bytes > max_batch_bytes:  # this worker's reply is full
            plan_for.queues.restore(record)
            del waiting[chosen]
            continue
        plan_bytes[chosen] = batch_bytes
        limits.acquire(record, now)
        assign(record, slot)
        plan.setdefault(chosen, []).append(record.assignment())
        if limits.name_closed(record.name, now):
            closed.add(record.name)
    return plan
