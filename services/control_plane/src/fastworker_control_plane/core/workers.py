"""The control plane's view of its subworkers: capacity, tasks in flight, liveness, and
the batches of tasks sent to them that they have not yet confirmed."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from fastworker_control_plane.core.dispatch_policy import Load
from fastworker_control_plane.core.fair_share import FairShare
from fastworker_control_plane.core.records import TaskRecord
from fastworker_protocol import (
    DEFAULT_QUEUE,
    Assignment,
    FailureReason,
    TaskError,
    TaskState,
    WorkerInfo,
    WorkerState,
)

MAX_PREFETCH = 10_000  # whatever a worker asks, it never holds more than this extra
# Requests a worker may send after a batch went out without confirming it before the batch
# counts as lost. A worker keeps at most two fetches outstanding, so one request can cross
# the batch on the wire; the one after that must carry the confirmation. One more of slack.
LOST_AFTER_REQUESTS = 3


@dataclass(frozen=True)
class Delivery:
    """What a worker's held fetch is answered with: tasks, and the batch number it confirms
    them by (0: nothing to confirm)."""

    tasks: list[Assignment] = field(default_factory=list)
    batch: int = 0


@dataclass
class Batch:
    """Tasks sent in one ``Assign``, until the worker confirms it received them."""

    task_ids: list[str]
    requests_since: int = 0


@dataclass
class WorkerSlot:
    worker_id: str
    name: str
    concurrency: int
    tasks: frozenset[str]
    last_seen: float
    local: bool = False
    state: WorkerState = WorkerState.RUNNING
    in_flight: dict[str, None] = field(default_factory=dict)  # ordered: oldest first
    assigned_total: int = 0
    completed: int = 0

    queues: dict[str, int] = field(default_factory=lambda: {DEFAULT_QUEUE: 1})  # -> weight
    share: FairShare = field(init=False)
    prefetch: int = 0
    confirms: bool = False  # it lists received batches (see ``Batch``)
    unconfirmed: dict[int, Batch] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.share = FairShare(self.queues)

    def served(self, existing: Collection[str]) -> list[str]:
        """The queues it serves among ``existing``."""
        return [queue for queue in self.queues if queue in existing]

    @property
    def accepts_work(self) -> bool:
        return self.state == WorkerState.RUNNING

    @property
    def capacity(self) -> int:
        """Tasks it may hold: its slots plus the buffer it asked for."""
        return self.concurrency + self.prefetch

    def set_prefetch(self, prefetch: int) -> None:
        self.prefetch = max(0, min(prefetch, MAX_PREFETCH))

    def offers(self, quick: set[str]) -> frozenset[str]:
        """The task names it can take one more of now: any of its own into a free slot,
        only quick ones into the buffer beyond its slots (a slow task waiting in a buffer
        could have started at once on another worker)."""
        held = len(self.in_flight)
        if held < self.concurrency:
            return self.tasks
        if held < self.capacity:
            return self.tasks & quick
        return frozenset()

    def deliver(self, tasks: list[Assignment], batch: int) -> Delivery:
        """Send ``tasks`` as batch number ``batch``, kept until the worker confirms it."""
        self.unconfirmed[batch] = Batch([task.id for task in tasks])
        return Delivery(tasks, batch)

    def heard(self, received: Collection[int]) -> list[str]:
        """A request arrived, confirming ``received``; returns the ids of tasks in batches
        now counted as lost (sent, and never confirmed by the requests that followed)."""
        lost: list[str] = []
        for number in received:
            self.unconfirmed.pop(number, None)
        for number, batch in list(self.unconfirmed.items()):
            batch.requests_since += 1
            if batch.requests_since >= LOST_AFTER_REQUESTS:
                del self.unconfirmed[number]
                lost += batch.task_ids
        return lost

    def load(self) -> Load:
        return Load(self.worker_id, len(self.in_flight), self.capacity, self.assigned_total)

    def info(self, now: float) -> WorkerInfo:
        return WorkerInfo(
            worker_id=self.worker_id,
            name=self.name,
            state=self.state,
            concurrency=self.concurrency,
            in_flight=len(self.in_flight),
            completed=self.completed,
            tasks=sorted(self.tasks),
            last_seen_ago=max(0.0, now - self.last_seen),
            local=self.local,
            queues=dict(self.queues),
        )


def overdue(
    workers: Iterable[WorkerSlot], tasks: Mapping[str, TaskRecord], now: float, margin: float
) -> list[TaskRecord]:
    """Running tasks with a time limit, silent ``margin`` seconds past it. A subworker
    stops a task at its limit and reports it at once, so such a task's outcome is lost
    or its subworker is broken: the control plane must not wait for it without bound."""
    late = []
    for slot in workers:
        for task_id in slot.in_flight:
            record = tasks.get(task_id)
            if record is None or record.state != TaskState.RUNNING or record.time_limit is None:
                continue
            if (
                record.started_at is not None
                and now > record.started_at + record.time_limit + margin
            ):
                late.append(record)
    return late


def silent_past_limit(margin: float) -> TaskError:
    return TaskError(
        type="Timeout",
        message=f"the subworker gave no outcome {margin:g} s past the task's time limit",
        reason=FailureReason.TIMEOUT,
    )


class WorkerRegistry:
    def __init__(self) -> None:
        self._workers: dict[str, WorkerSlot] = {}

    def add(self, slot: WorkerSlot) -> None:
        self._workers[slot.worker_id] = slot

    def get(self, worker_id: str) -> WorkerSlot | None:
        return self._workers.get(worker_id)

    def pop(self, worker_id: str) -> WorkerSlot | None:
        return self._workers.pop(worker_id, None)

    def silent_since(self, deadline: float) -> list[str]:
        """Remote workers not heard from since ``deadline`` (the local one cannot go silent)."""
        return [w.worker_id for w in self if not w.local and w.last_seen < deadline]

    def __iter__(self) -> Iterator[WorkerSlot]:
        return iter(list(self._workers.values()))

    def __len__(self) -> int:
        return len(self._workers)
