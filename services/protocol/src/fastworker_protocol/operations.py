# msgspec inherits frozen=True from Record; mypy's dataclass model does not know that:
# mypy: disable-error-code="misc"
"""Operations on the wire (issue 22): dead letters, and schedules added at run time.

All are served on the results port (base + 4), like the other listings and controls
(PROTOCOL.md, "Dead letters" and "Schedules at run time").

**Dead letters.** A task that ends ``failure`` for good (its retries used up; a lost
subworker or a timeout included) is kept, with its arguments, in a dead-letter store
separate from the results, bounded by count and age. ``list_failed`` reads it,
``retry_failed`` queues each selected dead letter again as a new task (same name,
arguments, priority and queue; a new id; ``retry_of`` naming the original) and takes it
out of the store, ``purge_failed`` drops them. A selection (``FailedFilter``) is either
explicit ids, or, with ``all_matching``, every dead letter that matches the filters:
a retry or purge with neither is refused, so that nobody replays a whole store by
accident.

**Schedules at run time.** ``add_schedule`` makes (or replaces, by name) a schedule that
runs a registered task with the given arguments, every ``interval`` seconds or on a
``cron`` expression in ``tz``; it is journaled and ticks exactly like the schedules
``@task(cron=...)`` declares (one run per tick, a tick skipped while the last run is live).
``remove_schedule`` stops it. Names are shared with declared schedules (whose name is
their task's): a run-time schedule cannot take or remove a declared one's name.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from fastworker_protocol.limits import UnixTime
from fastworker_protocol.messages import Message, Record, ScheduleInfo, TaskError
from fastworker_protocol.priority import Priority
from fastworker_protocol.queues import DEFAULT_QUEUE, QueueName
from fastworker_protocol.states import TaskState

MAX_FAILED_LISTED = 10_000  # dead letters one list_failed returns, at most
MAX_FAILED_ACTED = 10_000  # dead letters one retry_failed / purge_failed acts on, at most
SCHEDULE_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,199}$"
ScheduleName = Annotated[str, msgspec.Meta(pattern=SCHEDULE_NAME_PATTERN)]


# --- dead letters -----------------------------------------------------------------------


class DeadLetter(Record):
    """A task that failed for good, as the dead-letter store keeps it. ``error`` carries
    the last attempt's traceback; ``attempt_errors`` the earlier attempts'. ``retry_of``:
    the dead letter this task was a retry of, if it was one."""

    task_id: str
    name: str
    status: TaskState = TaskState.FAILURE
    error: TaskError | None = None
    args: list[Any] = msgspec.field(default_factory=list)
    kwargs: dict[str, Any] = msgspec.field(default_factory=dict)
    priority: Priority = Priority.NORMAL
    queue: str = DEFAULT_QUEUE
    attempts: int = 0
    attempt_errors: list[TaskError] = msgspec.field(default_factory=list)
    worker_id: str | None = None
    submitted_at: float | None = None
    failed_at: float = 0.0
    retry_of: str | None = None
    truncated: bool = False  # a listing left out its arguments or long texts to fit


class FailedFilter(Record, omit_defaults=True):
    """Which dead letters: all of ``task_ids`` when given (the filters then narrow them),
    else every one matching the filters. ``error_type`` is the exception's type name as
    reported (``"ValueError"``, ``"WorkerLost"``, ``"TimeoutError"``); ``since`` /
    ``until``: failed at or after / before, Unix seconds."""

    task_ids: list[str] = msgspec.field(default_factory=list)
    task_name: str | None = None
    error_type: str | None = None
    since: UnixTime | None = None
    until: UnixTime | None = None


class ListFailed(Message, tag="list_failed"):
    """The newest dead letters first; ``limit`` at most (1 to ``MAX_FAILED_LISTED``)."""

    filter: FailedFilter = FailedFilter()
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_FAILED_LISTED)] = 100


class FailedList(Message, tag="failed_list"):
    """``total``: how many dead letters match (``tasks`` may be fewer); ``stored``: how
    many the store holds in all."""

    tasks: list[DeadLetter]
    total: int = 0
    stored: int = 0
    more: bool = False


class RetryFailed(Message, tag="retry_failed"):
    """Queue the selected dead letters again, oldest first, at most ``MAX_FAILED_ACTED``
    (``more`` in the reply says some are left: ask again)."""

    filter: FailedFilter = FailedFilter()
    all_matching: bool = False


class Retried(Record):
    task_id: str  # the dead letter
    new_task_id: str  # the task that runs it again


class FailedRetried(Message, tag="failed_retried"):
    """``missing``: ids asked for that are not in the store (unknown, purged, expired or
    already retried)."""

    retried: list[Retried] = msgspec.field(default_factory=list)
    missing: list[str] = msgspec.field(default_factory=list)
    more: bool = False


class PurgeFailed(Message, tag="purge_failed"):
    """Drop the selected dead letters (every one that matches, with ``all_matching``)."""

    filter: FailedFilter = FailedFilter()
    all_matching: bool = False


class FailedPurged(Message, tag="failed_purged"):
    purged: int = 0
    missing: list[str] = msgspec.field(default_factory=list)


# --- schedules at run time ---------------------------------------------------------------


class ScheduleSpec(Record, omit_defaults=True):
    """A schedule made at run time: run ``task`` with ``args`` / ``kwargs`` every
    ``interval`` seconds or at each ``cron`` tick (five fields) in time zone ``tz``, at
    ``priority``, in ``queue`` (the task's own queue when ``None``). Exactly one of
    ``interval`` and ``cron``."""

    name: ScheduleName
    task: str
    args: list[Any] = msgspec.field(default_factory=list)
    kwargs: dict[str, Any] = msgspec.field(default_factory=dict)
    interval: float | None = None
    cron: str | None = None
    tz: str = "UTC"
    priority: Priority = Priority.NORMAL
    queue: QueueName | None = None


class AddSchedule(Message, tag="add_schedule"):
    """Make the schedule, or replace the run-time schedule of that name (an unchanged
    definition keeps its progress: adding the same schedule twice is one schedule)."""

    schedule: ScheduleSpec


class ScheduleAdded(Message, tag="schedule_added"):
    """The schedule as it now stands; ``created`` is false when it replaced (or already
    was) a run-time schedule of that name."""

    schedule: ScheduleInfo
    created: bool = True


class RemoveSchedule(Message, tag="remove_schedule"):
    name: ScheduleName


class ScheduleRemoved(Message, tag="schedule_removed"):
    """``removed`` is false when no run-time schedule had that name."""

    name: str
    removed: bool
