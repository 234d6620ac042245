"""The journal's on-disk schema (format 2, see ``frames.VERSION``): what an entry holds.

These structs are the file format, kept apart from the in-memory ``TaskRecord`` so that
changing how the control plane holds a task never silently changes what old journals
mean. They are encoded as msgpack maps with field names, so a field can be added without
a new format version: older code ignores it, newer code reads its default when it is
missing. Therefore never rename a field, change its type or change a default (defaults
are not written); add a new field instead, and bump ``frames.VERSION`` for anything else.
State and priority are written as the protocol's stable lowercase names.

``stored_task`` and ``task_record`` convert, field by field, between the two.
"""

from __future__ import annotations

from typing import Any

import msgspec

from fastworker_control_plane.core.dead_letters import Kept, kept
from fastworker_control_plane.core.periodic import PeriodicState
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.core.workflow_records import (
    LinkOutcome,
    StepOutcome,
    WorkflowCancel,
    WorkflowDefined,
    WorkflowProgress,
)
from fastworker_protocol import (
    DEFAULT_QUEUE,
    DeadLetter,
    Priority,
    ScheduleSpec,
    TaskError,
    TaskState,
)


class StoredError(msgspec.Struct, omit_defaults=True, gc=False):
    type: str
    message: str
    traceback: str = ""
    reason: str = "exception"


class StoredTask(msgspec.Struct, omit_defaults=True, gc=False):
    """Built positionally and not tracked by the garbage collector (like ``TaskRecord``,
    it is never in a cycle): ``stored_task`` runs for every task accepted and finished,
    and the two together make it three times cheaper."""

    id: str
    name: str
    priority: Priority
    state: TaskState
    args: list[Any] = msgspec.field(default_factory=list)
    kwargs: dict[str, Any] = msgspec.field(default_factory=dict)
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    submitted_at: float = 0.0
    queued_at: float = 0.0
    seq: int = 0  # its place in its queue, lower first
    size: int = 0
    attempts: int = 0
    worker_id: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    result: Any = None
    error: StoredError | None = None
    eta: float | None = None
    max_retries: int | None = None
    time_limit: float | None = msgspec.field(default=None, name="timeout")  # its old name
    retries: int = 0
    lost: int = 0
    returned: int = 0
    attempt_errors: list[StoredError] = msgspec.field(default_factory=list)
    idempotency_key: str | None = None
    arguments_kept: bool = True  # False: a final task's args and kwargs were let go
    queue: str = DEFAULT_QUEUE
    retry_of: str | None = None  # the dead letter it runs again
    result_ttl: float | None = None  # its task's own, once final (None: --result-ttl)


class StoredPeriodic(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str
    spec: str
    next_run: float
    last_run: float | None = None
    times_run: int = 0
    skipped: int = 0
    current: str | None = None


class Put(msgspec.Struct, tag="put", kw_only=True, gc=False):
    """A task written whole: accepted, queued again, or waiting for a time."""

    task: StoredTask


class Step(msgspec.Struct, tag="step", kw_only=True, omit_defaults=True, gc=False):
    """A task handed to a subworker (``assigned``) or started there (``running``)."""

    task_id: str
    state: TaskState
    attempts: int = 0
    worker_id: str | None = None


class Done(msgspec.Struct, tag="done", kw_only=True, gc=False):
    """A task written whole once final, with its result."""

    task: StoredTask


class Tick(msgspec.Struct, tag="tick", kw_only=True, gc=False):
    """A periodic schedule's progress."""

    periodic: StoredPeriodic


class StoredSchedule(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A schedule made at run time (``runtime_schedules``), as it was defined."""

    name: str
    task: str
    args: list[Any] = msgspec.field(default_factory=list)
    kwargs: dict[str, Any] = msgspec.field(default_factory=dict)
    interval: float | None = None
    cron: str | None = None
    tz: str = "UTC"
    priority: Priority = Priority.NORMAL
    queue: str | None = None


class ScheduleDefined(msgspec.Struct, tag="schedule", kw_only=True):
    """A run-time schedule made or replaced; its progress (``Tick``) starts afresh, and
    the ``Tick`` entries after this one carry it on."""

    schedule: StoredSchedule


class ScheduleDropped(msgspec.Struct, tag="unschedule", kw_only=True):
    """A run-time schedule removed (or its name taken back by a declaration)."""

    name: str


class StoredLimit(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A limit set at run time (``"off"`` / ``0``: lifted)."""

    scope: str
    name: str
    rate: str | None = None
    concurrency: int | None = None


class Controls(msgspec.Struct, tag="controls", kw_only=True, omit_defaults=True):
    """The queue controls set at run time, written whole whenever one changes: paused
    queues and limit settings."""

    paused: list[str] = msgspec.field(default_factory=list)
    limits: list[StoredLimit] = msgspec.field(default_factory=list)


class StoredDead(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """A dead letter: a task failed for good, with its arguments (``core/dead_letters``)."""

    id: str
    name: str
    priority: Priority
    failed_at: float
    error: StoredError | None = None
    args: list[Any] = msgspec.field(default_factory=list)
    kwargs: dict[str, Any] = msgspec.field(default_factory=dict)
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    queue: str = DEFAULT_QUEUE
    attempts: int = 0
    attempt_errors: list[StoredError] = msgspec.field(default_factory=list)
    worker_id: str | None = None
    submitted_at: float | None = None
    retry_of: str | None = None


class Dead(msgspec.Struct, tag="dead", kw_only=True, gc=False):
    """A task became a dead letter (its ``Done`` may have let go of its arguments)."""

    letter: StoredDead


class DeadGone(msgspec.Struct, tag="dead_gone", kw_only=True, gc=False):
    """Dead letters retried or purged. (Those a bound dropped need no entry: replay
    applies the same bounds.)"""

    task_ids: list[str]


# Workflows' records (``core/workflow_records``: tags ``workflow*``) share the journal.
Entry = (
    Put | Step | Done | Tick | Controls | Dead | DeadGone | ScheduleDefined | ScheduleDropped
    | WorkflowDefined | StepOutcome | LinkOutcome | WorkflowCancel | WorkflowProgress
)  # fmt: skip


def stored_task(record: TaskRecord) -> StoredTask:
    return StoredTask(
        record.id,
        record.name,
        record.priority,
        record.state,
        record.args,
        record.kwargs,
        record.headers,
        record.submitted_at,
        record.queued_at,
        record.seq,
        record.size,
        record.attempts,
        record.worker_id,
        record.started_at,
        record.finished_at,
        record.result,
        None if record.error is None else stored_error(record.error),
        record.eta,
        record.max_retries,
        record.time_limit,
        record.retries,
        record.lost,
        record.returned,
        [stored_error(e) for e in record.attempt_errors] if record.attempt_errors else [],
        record.idempotency_key,
        record.arguments_kept,
        record.queue,
        record.retry_of,
        record.result_ttl,
    )


def task_record(task: StoredTask) -> TaskRecord:
    return TaskRecord(
        id=task.id,
        name=task.name,
        priority=task.priority,
        state=task.state,
        args=task.args,
        kwargs=task.kwargs,
        headers=task.headers,
        submitted_at=task.submitted_at,
        queued_at=task.queued_at,
        seq=task.seq,
        size=task.size,
        attempts=task.attempts,
        worker_id=task.worker_id,
        started_at=task.started_at,
        finished_at=task.finished_at,
        result=task.result,
        error=None if task.error is None else task_error(task.error),
        eta=task.eta,
        max_retries=task.max_retries,
        time_limit=task.time_limit,
        retries=task.retries,
        lost=task.lost,
        returned=task.returned,
        attempt_errors=[task_error(e) for e in task.attempt_errors],
        idempotency_key=task.idempotency_key,
        arguments_kept=task.arguments_kept,
        queue=task.queue,
        retry_of=task.retry_of,
        result_ttl=task.result_ttl,
    )


def stored_dead(kept: Kept) -> StoredDead:
    letter = kept.letter
    return StoredDead(
        id=letter.task_id,
        name=letter.name,
        priority=letter.priority,
        failed_at=letter.failed_at,
        error=None if letter.error is None else stored_error(letter.error),
        args=letter.args,
        kwargs=letter.kwargs,
        headers=kept.headers,
        queue=letter.queue,
        attempts=letter.attempts,
        attempt_errors=[stored_error(e) for e in letter.attempt_errors],
        worker_id=letter.worker_id,
        submitted_at=letter.submitted_at,
        retry_of=letter.retry_of,
    )


def dead_letter(stored: StoredDead) -> Kept:
    return kept(
        DeadLetter(
            task_id=stored.id,
            name=stored.name,
            error=None if stored.error is None else task_error(stored.error),
            args=stored.args,
            kwargs=stored.kwargs,
            priority=stored.priority,
            queue=stored.queue,
            attempts=stored.attempts,
            attempt_errors=[task_error(e) for e in stored.attempt_errors],
            worker_id=stored.worker_id,
            submitted_at=stored.submitted_at,
            failed_at=stored.failed_at,
            retry_of=stored.retry_of,
        ),
        stored.headers,
    )


def stored_error(error: TaskError) -> StoredError:
    return StoredError(
        type=error.type, message=error.message, traceback=error.traceback, reason=error.reason
    )


def task_error(error: StoredError) -> TaskError:
    return TaskError(
        type=error.type, message=error.message, traceback=error.traceback, reason=error.reason
    )


def stored_periodic(state: PeriodicState) -> StoredPeriodic:
    return StoredPeriodic(
        name=state.name,
        spec=state.spec,
        next_run=state.next_run,
        last_run=state.last_run,
        times_run=state.times_run,
        skipped=state.skipped,
        current=state.current,
    )


def periodic_state(periodic: StoredPeriodic) -> PeriodicState:
    return PeriodicState(
        name=periodic.name,
        spec=periodic.spec,
        next_run=periodic.next_run,
        last_run=periodic.last_run,
        times_run=periodic.times_run,
        skipped=periodic.skipped,
        current=periodic.current,
    )


def stored_schedule(spec: ScheduleSpec) -> StoredSchedule:
    return StoredSchedule(
        name=spec.name,
        task=spec.task,
        args=spec.args,
        kwargs=spec.kwargs,
        interval=spec.interval,
        cron=spec.cron,
        tz=spec.tz,
        priority=spec.priority,
        queue=spec.queue,
    )


def schedule_spec(schedule: StoredSchedule) -> ScheduleSpec:
    return ScheduleSpec(
        name=schedule.name,
        task=schedule.task,
        args=schedule.args,
        kwargs=schedule.kwargs,
        interval=schedule.interval,
        cron=schedule.cron,
        tz=schedule.tz,
        priority=schedule.priority,
        queue=schedule.queue,
    )
