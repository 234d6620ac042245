"""Periodic tasks: when each one is due next, and what happened at each tick.

A periodic task is defined by its task's registration (``repeat_interval`` seconds, or a
``cron`` expression in ``cron_tz``, UTC by default), or made at run time
(``runtime_schedules``: a named schedule running a task with arguments). Each tick runs
``task`` with ``args`` / ``kwargs`` at ``priority`` (a declared one: its own task, with no
arguments, at the priority its registration declares). Its ticks live on the board's
scheduler heap, so one control plane decides each tick once, however many subworkers run
the task. Interval ticks stay on their grid (``start + n * interval``), whatever the runs
take; cron ticks follow the expression in the given time zone, DST included (cronsim).
A tick that finds the previous run still going is skipped and counted, never stacked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
from cronsim import CronSim, CronSimError

from fastworker_protocol import Priority, ScheduleInfo, TaskSignature

MIN_INTERVAL = 0.01  # seconds between ticks of a periodic task, at least
MAX_INTERVAL = 366 * 24 * 3600.0  # and at most a year
CRON_FIELDS = 5
DECLARED, RUNTIME = "declared", "runtime"  # where a schedule comes from


class BadSchedule(ValueError):
    pass


class PeriodicState(msgspec.Struct, array_like=True):
    """What a periodic task has done, as the journal keeps it across restarts."""

    name: str
    spec: str
    next_run: float
    last_run: float | None
    times_run: int
    skipped: int
    current: str | None


def _check_fields(name: str, cron: str) -> None:
    """Five fields, as PROTOCOL.md says: cronsim would also take a sixth (seconds), which
    other peers and the docs know nothing of."""
    fields = cron.split()
    if len(fields) != CRON_FIELDS:
        raise BadSchedule(
            f"{name}: a cron expression has {CRON_FIELDS} fields (minute hour day-of-month "
            f"month day-of-week), {cron!r} has {len(fields)}"
        )


@dataclass
class Periodic:
    name: str
    interval: float | None
    cron: str | None
    tz: ZoneInfo
    next_run: float
    last_run: float | None = None
    times_run: int = 0
    skipped: int = 0
    current: str | None = None  # id of the run in progress, if any
    # What each tick runs: ``task`` (the schedule's name when empty) with these arguments.
    task: str = ""
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    priority: Priority = Priority.NORMAL
    queue: str | None = None  # ``None``: the task's own queue
    source: str = DECLARED

    @classmethod
    def of(cls, signature: TaskSignature, now: float) -> Periodic | None:
        """The schedule a registration declares, first due after ``now``; ``None`` if it
        declares none. Raises ``BadSchedule`` for an unusable one."""
        if signature.repeat_interval is None and signature.cron is None:
            return None
        if signature.repeat_interval is not None and signature.cron is not None:
            raise BadSchedule(f"{signature.name}: give repeat_interval or cron, not both")
        periodic = cls.timed(
            signature.name, signature.repeat_interval, signature.cron, signature.cron_tz, now
        )
        periodic.task, periodic.priority = signature.name, signature.priority
        return periodic

    @classmethod
    def timed(
        cls, name: str, interval: float | None, cron: str | None, tz_name: str, now: float
    ) -> Periodic:
        """A schedule every ``interval`` seconds or on ``cron`` (one of them) in
        ``tz_name``, first due after ``now``. Raises ``BadSchedule`` for an unusable one."""
        if interval is not None and not MIN_INTERVAL <= interval <= MAX_INTERVAL:
            # NaN fails both comparisons too; tinier steps would spin the scheduler.
            raise BadSchedule(
                f"{name}: the interval must be between {MIN_INTERVAL:g} and "
                f"{MAX_INTERVAL:g} seconds, not {interval!r}"
            )
        if cron is not None:
            _check_fields(name, cron)
        try:
            tz = ZoneInfo(tz_name)
        except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: a name too long
            raise BadSchedule(f"{name}: unknown time zone {tz_name!r}") from exc
        periodic = cls(name, interval, cron, tz, now)
        periodic.next_run = periodic._after(now) if cron is not None else now + periodic._step()
        return periodic

    @property
    def runs(self) -> str:
        """The task each tick runs."""
        return self.task or self.name

    @property
    def spec(self) -> str:
        return f"every {self.interval:g} s" if self.interval is not None else f"cron {self.cron}"

    def state(self) -> PeriodicState:
        return PeriodicState(
            self.name,
            self.spec,
            self.next_run,
            self.last_run,
            self.times_run,
            self.skipped,
            self.current,
        )

    def resume(self, saved: PeriodicState) -> None:
        """Carry on from a saved state, unless the schedule itself has changed since."""
        if saved.spec != self.spec:
            return
        self.next_run = saved.next_run  # if long past, the first tick counts the missed ones
        self.last_run, self.times_run = saved.last_run, saved.times_run
        self.skipped, self.current = saved.skipped, saved.current

    def info(self, *, running: bool) -> ScheduleInfo:
        return ScheduleInfo(
            name=self.name,
            spec=self.spec,
            next_run=self.next_run,
            last_run=self.last_run,
            times_run=self.times_run,
            skipped=self.skipped,
            running=running,
            source=self.source,
            task=self.runs,
            args=self.args,
            kwargs=self.kwargs,
            priority=self.priority,
            queue=self.queue,
        )

    def advance(self, now: float) -> int:
        """Move ``next_run`` to the first tick after ``now``; returns the ticks missed on
        the way (the control plane was down or busy), which are skipped, not caught up."""
        if self.interval is None:
            self.next_run = self._after(now)
            return 0
        steps = math.floor((now - self.next_run) / self.interval) + 1
        self.next_run += steps * self.interval  # stay on the grid: no drift
        return steps - 1

    def _step(self) -> float:
        assert self.interval is not None
        return self.interval

    def _after(self, now: float) -> float:
        assert self.cron is not None
        try:
            return next(CronSim(self.cron, datetime.fromtimestamp(now, self.tz))).timestamp()
        except (CronSimError, StopIteration) as exc:
            raise BadSchedule(f"{self.name}: bad cron expression {self.cron!r}: {exc}") from exc
