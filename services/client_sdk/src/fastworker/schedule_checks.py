"""Checking a periodic task's schedule where it is declared, so a bad one fails loudly.

``@task(repeat_interval=...)`` or ``@task(cron=..., cron_tz=...)`` is checked when the
decorator runs: an unusable interval, a cron expression that is not five valid fields, a
time zone that does not exist, or a parameter without a default (the scheduler runs a
periodic task with no arguments) raises one :class:`ScheduleProblems`, a ``ValueError``
with every problem of that task, one line each, each naming the task by
``module.qualname`` (where to look, whatever name it is registered under).

A worker loading ``--task-modules`` wants every problem of every module at once, not the
first task's: inside :func:`collecting` the problems are noted instead of raised, the
imports carry on, and the loader reports the whole list (``fastworker_subworker.loader``).

The control plane checks the same again (``core/periodic.py``), for a subworker of another
version or a registry filled by hand. This module must stay cheap to import:
``cronsim`` and ``zoneinfo`` are imported only for a task that has a schedule.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

MIN_INTERVAL = 0.01  # seconds: the control plane's bounds (core/periodic.py)
MAX_INTERVAL = 366 * 24 * 3600.0
CRON_FIELDS = 5  # minute hour day-of-month month day-of-week, as PROTOCOL.md says

_collected: ContextVar[list[str] | None] = ContextVar("fastworker_schedule_problems", default=None)


class ScheduleProblems(ValueError):
    """Periodic tasks whose schedules cannot run; ``problems`` has one line for each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def check_schedule(
    fn: Callable[..., Any], repeat_interval: float | None, cron: str | None, cron_tz: str
) -> None:
    """Raise :class:`ScheduleProblems` if the schedule ``fn`` is declared with cannot
    run (or, inside :func:`collecting`, note its problems there)."""
    problems = schedule_problems(fn, repeat_interval, cron, cron_tz)
    if not problems:
        return
    collected = _collected.get()
    if collected is None:
        raise ScheduleProblems(problems)
    collected.extend(problems)


@contextmanager
def collecting() -> Iterator[list[str]]:
    """Note schedule problems in the list this yields instead of raising them, so a
    loader can import every module and then report them all."""
    problems: list[str] = []
    token = _collected.set(problems)
    try:
        yield problems
    finally:
        _collected.reset(token)


def schedule_problems(
    fn: Callable[..., Any], repeat_interval: float | None, cron: str | None, cron_tz: str
) -> list[str]:
    """Every reason the schedule declared for ``fn`` cannot run, one line each, naming
    it; none for a task with no schedule."""
    if repeat_interval is None and cron is None:
        return []
    found: list[str] = []
    if repeat_interval is not None and cron is not None:
        found.append("give repeat_interval or cron, not both")
    if repeat_interval is not None:
        found += _interval_problems(repeat_interval)
    if cron is not None:
        found += _cron_problems(cron)
    found += _zone_problems(cron_tz)
    found += _argument_problems(fn)
    where = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    return [f"{where}: {problem}" for problem in found]


def _interval_problems(interval: object) -> list[str]:
    if (
        isinstance(interval, int | float)
        and not isinstance(interval, bool)
        and math.isfinite(interval)
        and MIN_INTERVAL <= interval <= MAX_INTERVAL
    ):
        return []
    return [
        f"repeat_interval must be between {MIN_INTERVAL:g} seconds and a year "
        f"({MAX_INTERVAL:g} s), not {interval!r}"
    ]


def _cron_problems(cron: object) -> list[str]:
    if not isinstance(cron, str):
        return [f"cron must be a string of {CRON_FIELDS} fields, not {cron!r}"]
    fields = cron.split()
    if len(fields) != CRON_FIELDS:
        return [
            f"a cron expression has {CRON_FIELDS} fields (minute hour day-of-month month "
            f"day-of-week), {cron!r} has {len(fields)}"
        ]
    from datetime import UTC, datetime

    from cronsim import CronSim, CronSimError  # only a cron task pays for its import

    try:
        next(CronSim(cron, datetime.now(UTC)))
    except (CronSimError, StopIteration) as exc:
        return [f"bad cron expression {cron!r}: {exc or 'it never fires'}"]
    return []


def _zone_problems(tz_name: object) -> list[str]:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if not isinstance(tz_name, str):
        return [f"cron_tz must be a time zone name, not {tz_name!r}"]
    try:
        ZoneInfo(tz_name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a path
        return [f"unknown time zone {tz_name!r} (cron_tz takes IANA names: 'Europe/Paris')"]
    return []


def _argument_problems(fn: Callable[..., Any]) -> list[str]:
    """The scheduler calls a periodic task with no arguments: every parameter needs a
    default (``*args`` and ``**kwargs`` are simply left empty)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []  # no signature to read: the control plane's check is the last word
    required = [
        p.name
        for p in params
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if not required:
        return []
    names = ", ".join(repr(name) for name in required)
    verb = "has" if len(required) == 1 else "have"
    return [f"a periodic task runs without arguments, but {names} {verb} no default"]
