"""What the clients' operations calls send and how their replies are read, with no I/O:
failed tasks (dead letters) and schedules made at run time.

Both clients (async and blocking) find, retry and purge dead letters and add and remove
schedules the same way; only the moving of bytes differs, so the messages, the client-side
checks and the "ask again" rules live here, once, and the calls themselves
(``_operation_calls``) are thin loops over them.

A retry or purge names its dead letters, or says ``all_matching``: one with neither is
refused here, before anything is sent, so that nobody replays or drops a whole store by
accident. The control plane acts on at most ``MAX_FAILED_ACTED`` dead letters a request;
the calls ask again until everything selected is done.

Never import the subworker or the control plane from here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from fastworker._calls import TaskRef, check_arguments, priority_of
from fastworker.errors import TaskNotFound
from fastworker_protocol import (
    MAX_FAILED_ACTED,
    DeadLetter,
    ErrorCode,
    FailedFilter,
    FailedList,
    FailedPurged,
    FailedRetried,
    ListFailed,
    Priority,
    PurgeFailed,
    Retried,
    RetryFailed,
    ScheduleSpec,
    check_queue,
)
from fastworker_protocol.operations import SCHEDULE_NAME_PATTERN

MIN_INTERVAL = 0.01  # seconds, as @task(repeat_interval=) allows
MAX_INTERVAL = 366 * 24 * 3600.0
_SCHEDULE_NAME = re.compile(SCHEDULE_NAME_PATTERN)

When = datetime | float | None  # a datetime (naive = UTC), or Unix seconds


class FailedPage(list[DeadLetter]):
    """What ``list_failed`` returns: the dead letters, newest first; ``total``: how many
    matched (the list may hold fewer, up to its ``limit``); ``stored``: how many the store
    holds in all; ``more``: matching ones were left out. A listed dead letter whose
    arguments or texts were too long to list has ``truncated`` set (``get_failed`` reads
    one whole)."""

    total: int = 0
    stored: int = 0
    more: bool = False


class Retries(list[Retried]):
    """What ``retry_failed`` returns: each retried dead letter's id and its new task's id;
    ``missing``: ids asked for that were not in the store (unknown, purged, expired or
    already retried)."""

    missing: list[str]

    def __init__(self) -> None:
        super().__init__()
        self.missing = []


# --- dead letters -------------------------------------------------------------------------


def unix_time(value: When, what: str) -> float | None:
    """``value`` as Unix seconds: a datetime (naive = UTC) or a number of them."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a datetime or Unix seconds, not {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a time after 1970, not {value!r}")
    return float(value)


def failed_filter(
    task_ids: Sequence[str] = (),
    *,
    task_name: str | None = None,
    error_type: str | None = None,
    since: When = None,
    until: When = None,
) -> FailedFilter:
    """Which dead letters: ``task_ids`` (narrowed by the filters) or, with none, every one
    that matches the filters (failed at or after ``since``, before ``until``)."""
    for task_id in task_ids:
        if not isinstance(task_id, str) or not task_id:
            raise TypeError(f"a task id is a non-empty str, not {task_id!r}")
    return FailedFilter(
        task_ids=list(task_ids),
        task_name=task_name or None,
        error_type=error_type or None,
        since=unix_time(since, "since"),
        until=unix_time(until, "until"),
    )


def check_selection(task_ids: Sequence[str], all_matching: bool) -> None:
    """Refuse a retry or purge that names neither ids nor ``all_matching`` (or both)."""
    if task_ids and all_matching:
        raise ValueError("give task ids or all_matching=True, not both")
    if not task_ids and not all_matching:
        raise ValueError(
            "give the dead letters' task ids, or all_matching=True to act on every dead "
            "letter that matches the filters (all of them, with no filter)"
        )


def list_message(found: FailedFilter, limit: int) -> ListFailed:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"limit must be a positive int, not {limit!r}")
    return ListFailed(filter=found, limit=limit)


def failed_page(reply: FailedList) -> FailedPage:
    page = FailedPage(reply.tasks)
    page.total, page.stored, page.more = reply.total, reply.stored, reply.more
    return page


def one_failed(task_id: str, reply: FailedList) -> DeadLetter:
    """The dead letter ``task_id`` of a listing of it, or ``TaskNotFound``."""
    for dead in reply.tasks:
        if dead.task_id == task_id:
            return dead
    raise TaskNotFound(
        ErrorCode.TASK_NOT_FOUND,
        f"no dead letter {task_id}: unknown, retried, purged or expired",
    )


def retry_messages(found: FailedFilter, all_matching: bool) -> Iterator[RetryFailed]:
    """The first ``RetryFailed`` of each part of a selection: explicit ids go in parts of
    ``MAX_FAILED_ACTED``, a selection by filters in one (asked again, see ``retry_again``)."""
    if not found.task_ids:
        yield RetryFailed(filter=found, all_matching=all_matching)
        return
    for part in _parts(found.task_ids):
        yield RetryFailed(filter=msgspec.structs.replace(found, task_ids=part))


def retry_again(sent: RetryFailed, reply: FailedRetried, into: Retries) -> RetryFailed | None:
    """Add ``reply`` to ``into``; the request that goes on with the selection if the
    control plane said it left some (``more``) and did make progress, else ``None``."""
    into.extend(reply.retried)
    into.missing.extend(reply.missing)
    if not reply.more or not reply.retried:
        return None
    if not sent.filter.task_ids:
        return sent  # retried dead letters leave the store: the same request goes on
    done = {r.task_id for r in reply.retried} | set(reply.missing)
    left = [i for i in sent.filter.task_ids if i not in done]
    if not left:
        return None
    return msgspec.structs.replace(sent, filter=msgspec.structs.replace(sent.filter, task_ids=left))


def purge_messages(found: FailedFilter, all_matching: bool) -> Iterator[PurgeFailed]:
    """As ``retry_messages``, for a purge."""
    if not found.task_ids:
        yield PurgeFailed(filter=found, all_matching=all_matching)
        return
    for part in _parts(found.task_ids):
        yield PurgeFailed(filter=msgspec.structs.replace(found, task_ids=part))


def purge_again(sent: PurgeFailed, reply: FailedPurged) -> bool:
    """Whether a purge by filters should be sent again: it dropped as many as one request
    may (``FailedPurged`` has no ``more``: one more request that drops none ends it)."""
    return not sent.filter.task_ids and reply.purged >= MAX_FAILED_ACTED


def _parts(task_ids: list[str]) -> Iterator[list[str]]:
    unique = list(dict.fromkeys(task_ids))
    for i in range(0, len(unique), MAX_FAILED_ACTED):
        yield unique[i : i + MAX_FAILED_ACTED]


# --- schedules at run time ----------------------------------------------------------------


def interval_seconds(interval: float | timedelta) -> float:
    """An interval in seconds, checked: 0.01 s to a year, as ``@task`` allows."""
    seconds = interval.total_seconds() if isinstance(interval, timedelta) else interval
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"interval must be seconds or a timedelta, not {interval!r}")
    if not MIN_INTERVAL <= seconds <= MAX_INTERVAL:
        raise ValueError(f"interval must be between 0.01 seconds and a year, not {seconds!r}")
    return float(seconds)


def schedule_spec(
    name: str,
    task: TaskRef,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    *,
    cron: str | None,
    interval: float | timedelta | None,
    tz: str,
    priority: Priority | str | None,
    queue: str | None,
) -> ScheduleSpec:
    """The schedule as it is sent, checked first: its name, exactly one of ``cron`` and
    ``interval``, a five-field cron expression, portable arguments, the queue's name. The
    control plane checks the rest (the task is registered, the arguments fit it, the time
    zone exists, the cron fields are in range)."""
    check_schedule_name(name)
    if (cron is None) == (interval is None):
        raise ValueError("give exactly one of cron= (an expression) and interval= (seconds)")
    if cron is not None and len(cron.split()) != 5:
        raise ValueError(f"cron must have five fields (minute hour day month weekday): {cron!r}")
    if queue is not None:
        check_queue(queue)
    task_name = task if isinstance(task, str) else task.name
    arguments, keywords = check_arguments(task_name, list(args), dict(kwargs or {}))
    return ScheduleSpec(
        name=name,
        task=task_name,
        args=arguments,
        kwargs=keywords,
        interval=None if interval is None else interval_seconds(interval),
        cron=None if cron is None else " ".join(cron.split()),
        tz=tz,
        priority=priority_of(task, priority),
        queue=queue,
    )


def check_schedule_name(name: str) -> str:
    if not isinstance(name, str) or not _SCHEDULE_NAME.match(name):
        raise ValueError(
            f"bad schedule name {name!r}: up to 200 letters, digits and _ . : @ - "
            "(not starting with one of . : @ -)"
        )
    return name
