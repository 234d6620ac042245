"""The control plane's view of its subworkers: capacity, tasks in flight, liveness."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from fastworker_control_plane.core.dispatch_policy import Load
from fastworker_protocol import WorkerInfo, WorkerState

MAX_PREFETCH = 10_000  # whatever a worker asks, it never holds more than this extra


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

    prefetch: int = 0

    @property
    def accepts_work(self) -> bool:
        return self.state == WorkerState.RUNNING

    @property
    def capacity(self) -> int:
        """Tasks it may hold: its slots plus the buffer it asked for."""
        return self.concurrency + self.prefetch

    def set_prefetch(self, prefetch: int) -> None:
        self.prefetch = max(0, min(prefetch, MAX_PREFETCH))

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
