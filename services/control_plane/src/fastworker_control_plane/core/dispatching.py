"""One dispatch round: which queued tasks go to which waiting workers. No I/O.

Each priority keeps one line per task name (``PriorityQueues``), and only the names some
waiting worker can take now are asked for, so a backlog of any size that no waiting
worker can run (its workers are busy, or none runs its name) is never scanned and never
delays a task another worker can start. Each task goes to the least-loaded worker that
offers its name (``WorkerSlot.offers``: any of its names into a free slot, only quick
ones into its prefetch buffer).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

from fastworker_control_plane.core.dispatch_policy import least_loaded
from fastworker_control_plane.core.queues import IsQueued, PriorityQueues
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.core.workers import WorkerSlot
from fastworker_protocol import Assignment

Assign = Callable[[TaskRecord, WorkerSlot], None]


def dispatch_round(
    queues: PriorityQueues,
    slots: Mapping[str, WorkerSlot],
    tasks: Mapping[str, TaskRecord],
    is_queued: IsQueued,
    quick: set[str],
    max_batch_bytes: int,
    assign: Assign,
) -> dict[str, list[Assignment]]:
    """Hand queued tasks, most urgent first, to the ``slots`` (the workers waiting for
    work); ``assign`` records each handoff (and so changes what the worker offers)."""
    slots = dict(slots)
    offers = {wid: slot.offers(quick) for wid, slot in slots.items()}
    wanted = _union(offers.values())
    plan: dict[str, list[Assignment]] = {}
    plan_bytes: dict[str, int] = {}
    while wanted:
        task_id = queues.pop(is_queued, wanted)
        if task_id is None:
            break
        record = tasks[task_id]
        chosen = least_loaded(s.load() for wid, s in slots.items() if record.name in offers[wid])
        assert chosen is not None, "a name is wanted only while a worker offers it"
        slot = slots[chosen]
        batch_bytes = plan_bytes.get(chosen, 0) + record.size
        if batch_bytes > max_batch_bytes:  # this worker's reply is full
            queues.restore(task_id, record.name, record.priority, record.seq)
            del slots[chosen], offers[chosen]
            wanted = _union(offers.values())
            continue
        plan_bytes[chosen] = batch_bytes
        assign(record, slot)
        plan.setdefault(chosen, []).append(record.assignment())
        if len(slot.in_flight) in (slot.concurrency, slot.capacity):  # its offer shrank
            offers[chosen] = slot.offers(quick)
            wanted = _union(offers.values())
    return plan


def _union(offers: Iterable[Collection[str]]) -> set[str]:
    wanted: set[str] = set()
    for names in offers:
        wanted.update(names)
    return wanted
