"""What the journal holds, and how it turns back into tasks: pure, no I/O.

One entry per task transition: ``Put`` writes a task whole (accepted, queued again,
waiting for a time), ``Step`` notes it handed to or started by a subworker, ``Done``
writes it final with its result; ``Tick`` keeps a periodic task's progress. Replaying
the entries in order leaves each task's latest state, which is all recovery needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec

from fastworker_control_plane.core.board import Change, TaskBoard
from fastworker_control_plane.core.periodic import PeriodicState
from fastworker_control_plane.core.records import TaskRecord
from fastworker_protocol import TaskState


class Put(msgspec.Struct, tag=0, array_like=True):
    task: TaskRecord


class Step(msgspec.Struct, tag=1, array_like=True):
    task_id: str
    state: TaskState
    attempts: int
    worker_id: str | None


class Done(msgspec.Struct, tag=2, array_like=True):
    task: TaskRecord


class Tick(msgspec.Struct, tag=3, array_like=True):
    periodic: PeriodicState


Entry = Put | Step | Done | Tick

_STEPS = (TaskState.ASSIGNED, TaskState.RUNNING)


class Recorder:
    """Turns the board's transitions into entries, as they happen."""

    def __init__(self) -> None:
        self._periodics: dict[str, PeriodicState] = {}  # as last written

    def entries(self, changes: Iterable[Change], board: TaskBoard, now: float) -> list[Entry]:
        entries: list[Entry] = []
        for change in changes:
            if change.state in _STEPS:
                entries.append(
                    Step(change.task_id, change.state, change.attempts, change.worker_id)
                )
                continue
            record = board.record(change.task_id, now, count=False)
            if record is None:
                continue  # final and already evicted from the result cache: nothing to keep
            if not change.state.is_final:
                entries.append(Put(record.stored()))
            elif record.state.is_final:  # not a failure that is being retried
                entries.append(Done(record.stored()))
        for periodic in board.periodics.values():
            state = periodic.state()
            if self._periodics.get(periodic.name) != state:
                self._periodics[periodic.name] = state
                entries.append(Tick(state))
        return entries


def snapshot(board: TaskBoard, now: float) -> list[Entry]:
    """The board's whole durable state as entries: what a compacted journal holds."""
    kept = sorted(board.results.values(now), key=lambda r: r.finished_at or 0.0)
    periodics = [p.state() for p in board.periodics.values()]
    periodics += board.saved_periodics.values()
    return [
        *(Done(record.stored()) for record in kept),
        *(Put(record.stored()) for record in board.live_records()),
        *(Tick(state) for state in periodics),
    ]


@dataclass
class Recovered:
    """The latest state of every task and periodic schedule the journal names."""

    live: dict[str, TaskRecord] = field(default_factory=dict)
    final: dict[str, TaskRecord] = field(default_factory=dict)
    periodics: dict[str, PeriodicState] = field(default_factory=dict)

    def apply(self, entry: Entry) -> None:
        match entry:
            case Put(task=task):
                self.final.pop(task.id, None)
                self.live[task.id] = task
            case Step(task_id=task_id, state=state, attempts=attempts, worker_id=worker_id):
                held = self.live.get(task_id)
                if held is not None:
                    held.state, held.attempts, held.worker_id = state, attempts, worker_id
            case Done(task=task):
                self.live.pop(task.id, None)
                self.final[task.id] = task
            case Tick(periodic=state):
                self.periodics[state.name] = state

    def restore(self, board: TaskBoard, now: float) -> int:
        """Put everything back on ``board``; returns how many tasks were redelivered
        (a subworker held them when the control plane stopped)."""
        for task in sorted(self.final.values(), key=lambda t: t.finished_at or 0.0):
            if (task.finished_at or 0.0) + board.results.ttl > now:
                board.keep(task)
        redelivered = 0
        for task in sorted(self.live.values(), key=lambda t: t.queued_at):
            redelivered += task.state in _STEPS
            board.adopt(task, now)
        board.saved_periodics.update(self.periodics)
        return redelivered
