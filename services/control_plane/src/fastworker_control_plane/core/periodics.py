"""The periodic schedules, as the board runs them: those registrations declare (named
after their task) and those made at run time (``runtime_schedules``, which validates
them): one key per schedule on the scheduler heap, the state the journal saved for each,
and their listing. No I/O.

A tick queues a run through the board (``Enqueue``), unless the previous run is still
live (``IsLive``): then it is skipped and counted, never stacked. A schedule replaced or
removed leaves its old heap entry behind; a tick that is not (or no longer) due is
ignored, so no schedule ever ticks twice for one due time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from fastworker_control_plane.core.arguments import ArgumentChecker
from fastworker_control_plane.core.periodic import (
    DECLARED,
    BadSchedule,
    Periodic,
    PeriodicState,
)
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.schedule import Schedule
from fastworker_protocol import (
    ErrorCode,
    Priority,
    ScheduleInfo,
    ScheduleSpec,
    TaskSignature,
    TaskSpec,
)

KEY = "periodic:"  # scheduler-heap keys of periodic ticks (task ids are the others)

Enqueue = Callable[[TaskSpec, Priority, float], str]
IsLive = Callable[[str], bool]


class Periodics:
    def __init__(self, schedule: Schedule, is_live: IsLive) -> None:
        self._schedule = schedule
        self._is_live = is_live
        self.active: dict[str, Periodic] = {}
        # From the journal: resumed when a registration declares the schedule again.
        self.saved: dict[str, PeriodicState] = {}
        # The run-time schedules' definitions, and a count bumped when they change (the
        # journal's recorder writes them then).
        self.defined: dict[str, ScheduleSpec] = {}
        self.version = 0

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
        """Start the periodic tasks these registrations declare (once per name). Raises
        ``Rejected`` naming every unusable schedule among them, one per line, and then
        starts none of them."""
        new: list[Periodic] = []
        problems: list[str] = []
        for signature in signatures:
            existing = self.active.get(signature.name)
            if existing is not None and existing.source == DECLARED:
                continue
            try:
                periodic = _declared(signature, checkers, now)
            except BadSchedule as exc:
                problems.append(str(exc))
                continue
            if periodic is not None:
                new.append(periodic)
        if problems:
            raise Rejected(ErrorCode.INVALID_MESSAGE, "\n".join(problems))
        for periodic in new:
            existing = self.active.get(periodic.name)
            if existing is not None and existing.source == DECLARED:
                continue  # named twice in these registrations
            if existing is not None:  # a declaration takes its name from a run-time one
                self.undefine(periodic.name)
            saved = self.saved.pop(periodic.name, None)
            if saved is not None:
                periodic.resume(saved)
            self.start(periodic)

    def save(self, states: Iterable[PeriodicState]) -> None:
        """Progress from the journal, resumed when a registration declares its schedule
        again (``learn``)."""
        self.saved.update((state.name, state) for state in states)

    def start(self, periodic: Periodic) -> None:
        self.active[periodic.name] = periodic
        self._schedule.push(periodic.next_run, KEY + periodic.name)

    def define(self, spec: ScheduleSpec, periodic: Periodic) -> None:
        """Run a run-time schedule (``periodic``, made of ``spec``) from now on."""
        self.defined[spec.name] = spec
        self.version += 1
        self.saved.pop(spec.name, None)  # no older progress of that name applies
        self.start(periodic)

    def undefine(self, name: str) -> bool:
        """Stop the run-time schedule ``name``; whether there was one."""
        if self.defined.pop(name, None) is None:
            return False
        self.version += 1
        del self.active[name]
        return True

    def tick(self, key: str, now: float, enqueue: Enqueue) -> int:
        """One due tick: a new run (its id is ``NAME@DUE``, the due time to the
        millisecond) given to ``enqueue``, unless the last one is still live; returns how
        many were queued."""
        periodic = self.active[key.removeprefix(KEY)]
        if periodic.next_run > now:  # a replaced schedule's old entry: not due
            return 0
        queued = 0
        if periodic.current is not None and self._is_live(periodic.current):
            periodic.skipped += 1
        else:
            spec = TaskSpec(
                name=periodic.runs,
                id=f"{periodic.name}@{periodic.next_run:.3f}",
                args=periodic.args,
                kwargs=periodic.kwargs,
                queue=periodic.queue,
            )
            periodic.current = enqueue(spec, periodic.priority, now)
            periodic.times_run += 1
            periodic.last_run = now
            queued = 1
        periodic.skipped += periodic.advance(now)
        self._schedule.push(periodic.next_run, KEY + periodic.name)
        return queued

    def infos(self) -> list[ScheduleInfo]:
        """Every schedule, declared and run-time, by name."""
        return [self.info(p) for p in sorted(self.active.values(), key=lambda p: p.name)]

    def info(self, periodic: Periodic) -> ScheduleInfo:
        current = periodic.current
        return periodic.info(running=current is not None and self._is_live(current))


def _declared(
    signature: TaskSignature, checkers: Mapping[str, ArgumentChecker], now: float
) -> Periodic | None:
    """The schedule a registration declares (``None``: it declares none); raises
    ``BadSchedule`` for one that cannot run, its arguments included (none are given)."""
    periodic = Periodic.of(signature, now)
    checker = checkers.get(signature.name)
    if periodic is not None and checker is not None:
        problem = checker.problem([], {})
        if problem is not None:
            raise BadSchedule(
                f"{signature.name}: a periodic task is called without arguments: {problem}"
            )
    return periodic
