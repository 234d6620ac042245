"""The periodic tasks registrations declare, as the board runs them: one key per task on
the scheduler heap, the state the journal saved for each, and their listing. No I/O.

A tick queues a run through the board (``Enqueue``), unless the previous run is still
live (``IsLive``): then it is skipped and counted, never stacked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from fastworker_control_plane.core.arguments import ArgumentChecker
from fastworker_control_plane.core.periodic import BadSchedule, Periodic, PeriodicState
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.schedule import Schedule
from fastworker_protocol import ErrorCode, ScheduleInfo, TaskSignature, TaskSpec

KEY = "periodic:"  # scheduler-heap keys of periodic ticks (task ids are the others)

Enqueue = Callable[[TaskSpec, float], str]
IsLive = Callable[[str], bool]


class Periodics:
    def __init__(self, schedule: Schedule, enqueue: Enqueue, is_live: IsLive) -> None:
        self._schedule = schedule
        self._enqueue = enqueue
        self._is_live = is_live
        self.active: dict[str, Periodic] = {}
        # From the journal: resumed when a registration declares the schedule again.
        self.saved: dict[str, PeriodicState] = {}

    @staticmethod
    def owns(key: str) -> bool:
        return key.startswith(KEY)

    def is_due_key(self, key: str) -> bool:
        """Whether a heap key of ours still names an active schedule."""
        return key.removeprefix(KEY) in self.active

    def learn(
        self,
        signatures: Iterable[TaskSignature],
        checkers: Mapping[str, ArgumentChecker],
        now: float,
    ) -> None:
        """Start the periodic tasks these registrations declare (once per name)."""
        for signature in signatures:
            if signature.name in self.active:
                continue
            try:
                periodic = Periodic.of(signature, now)
            except BadSchedule as exc:
                raise Rejected(ErrorCode.INVALID_MESSAGE, str(exc)) from None
            if periodic is None:
                continue
            checker = checkers.get(signature.name)
            if checker is not None and (problem := checker.problem([], {})) is not None:
                raise Rejected(
                    ErrorCode.INVALID_MESSAGE,
                    f"a periodic task is called without arguments: {problem}",
                )
            saved = self.saved.pop(signature.name, None)
            if saved is not None:
                periodic.resume(saved)
            self.active[signature.name] = periodic
            self._schedule.push(periodic.next_run, KEY + signature.name)

    def tick(self, key: str, now: float) -> int:
        """One due tick: a new run (its id is ``NAME@DUE``, the due time to the
        millisecond), unless the last one is still live; returns how many were queued."""
        periodic = self.active[key.removeprefix(KEY)]
        queued = 0
        if periodic.current is not None and self._is_live(periodic.current):
            periodic.skipped += 1
        else:
            spec = TaskSpec(name=periodic.name, id=f"{periodic.name}@{periodic.next_run:.3f}")
            periodic.current = self._enqueue(spec, now)
            periodic.times_run += 1
            periodic.last_run = now
            queued = 1
        periodic.skipped += periodic.advance(now)
        self._schedule.push(periodic.next_run, KEY + periodic.name)
        return queued

    def infos(self) -> list[ScheduleInfo]:
        ordered = sorted(self.active.values(), key=lambda p: p.name)
        live = self._is_live
        return [p.info(running=p.current is not None and live(p.current)) for p in ordered]
