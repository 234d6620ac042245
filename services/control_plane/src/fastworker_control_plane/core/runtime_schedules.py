"""Schedules made at run time (``add_schedule`` / ``remove_schedule``): checked against
the tasks registered, then run by ``Periodics`` exactly like declared ones. No I/O.

A run-time schedule has a name of its own (``SCHEDULE_NAME_PATTERN``) and runs a
registered task with arguments, every ``interval`` seconds or on a five-field ``cron``
expression in ``tz``, at a priority, in a queue. The rules:

- Its task must be registered, and its arguments must bind to the task's signature: a
  schedule that could only fail is refused when it is made, not at every tick. A short
  task name (``add`` for ``app.tasks.add``) is kept as the full name it stands for.
- A declared schedule's name (its task's name) is not for taking, nor for removing: the
  ``@task`` declaration owns it. A declaration that arrives later (a new subworker
  version) takes its name back: the run-time schedule of that name is dropped.
- Adding a name again replaces its schedule; the very same definition is left as it is,
  progress included, so an add retried by a client is one schedule.
- ``MAX_RUNTIME_SCHEDULES`` of them at most, with ``MAX_ARGUMENT_BYTES`` of arguments
  each: they are all held in memory and written whole in every compacted journal.

Restored from the journal (``restore``) before any subworker has registered, they are
not checked against the catalog again: they were when they were made.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.periodic import DECLARED, RUNTIME, BadSchedule, Periodic
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import MAX_NESTING, ErrorCode, ScheduleInfo, ScheduleSpec, nesting_depth

MAX_RUNTIME_SCHEDULES = 10_000
MAX_ARGUMENT_BYTES = 64 * 1024  # a schedule's args and kwargs, msgpack-encoded

_encoder = msgspec.msgpack.Encoder()


def periodic_of(spec: ScheduleSpec, now: float) -> Periodic:
    """The schedule ``spec`` defines, first due after ``now``; raises ``BadSchedule``
    for an unusable time (neither or both of interval and cron, a bad expression or
    time zone, an interval out of bounds)."""
    if (spec.interval is None) == (spec.cron is None):
        raise BadSchedule(f"{spec.name}: give exactly one of interval and cron")
    periodic = Periodic.timed(spec.name, spec.interval, spec.cron, spec.tz, now)
    periodic.task, periodic.source = spec.task, RUNTIME
    periodic.args, periodic.kwargs = spec.args, spec.kwargs
    periodic.priority, periodic.queue = spec.priority, spec.queue
    return periodic


def add(board: TaskBoard, spec: ScheduleSpec, now: float) -> tuple[ScheduleInfo, bool]:
    """Make (or replace) the run-time schedule ``spec`` names; returns it as it now
    stands, and whether it is new. Raises ``Rejected`` for a schedule that cannot be."""
    periodics = board.schedules
    _check_name(board, spec.name)
    task = board.catalog.resolve(spec.task)  # kept under the full name it stands for
    spec = spec if task == spec.task else msgspec.structs.replace(spec, task=task)
    _check_run(board, spec)
    try:
        periodic = periodic_of(spec, now)
    except BadSchedule as exc:
        raise Rejected(ErrorCode.INVALID_MESSAGE, str(exc)) from None
    existing = periodics.defined.get(spec.name)
    if existing == spec:  # the same again (a retried request): progress kept
        return periodics.info(periodics.active[spec.name]), False
    if existing is None and len(periodics.defined) >= MAX_RUNTIME_SCHEDULES:
        raise Rejected(
            ErrorCode.INVALID_MESSAGE,
            f"there are already {MAX_RUNTIME_SCHEDULES} run-time schedules (the most "
            "a control plane keeps): remove some first",
        )
    periodics.undefine(spec.name)
    periodics.define(spec, periodic)
    return periodics.info(periodic), existing is None


def remove(board: TaskBoard, name: str) -> bool:
    """Stop the run-time schedule ``name``; whether there was one. Raises ``Rejected``
    for a declared schedule's name."""
    _check_name(board, name, removing=True)
    return board.schedules.undefine(name)


def restore(board: TaskBoard, specs: Iterable[ScheduleSpec], now: float) -> list[str]:
    """Run the journal's run-time schedules again, each from its saved progress (in
    ``board.schedules.saved``) when it has some; returns the names of those that can no
    longer be made (their time zone is gone), which are dropped."""
    dropped = []
    periodics = board.schedules
    for spec in specs:
        try:
            periodic = periodic_of(spec, now)
        except BadSchedule:
            dropped.append(spec.name)
            continue
        saved = periodics.saved.pop(spec.name, None)
        if saved is not None:
            periodic.resume(saved)
        periodics.define(spec, periodic)
    return dropped


def _check_name(board: TaskBoard, name: str, *, removing: bool = False) -> None:
    existing = board.schedules.active.get(name)
    signature = board.catalog.signatures.get(name)
    declared = signature is not None and (
        signature.repeat_interval is not None or signature.cron is not None
    )
    if declared or (existing is not None and existing.source == DECLARED):
        doing = "removed here" if removing else "taken by a run-time schedule"
        raise Rejected(
            ErrorCode.INVALID_MESSAGE,
            f"{name!r} is the schedule task {name!r} declares (@task(repeat_interval=...) or "
            f"@task(cron=...)): it cannot be {doing}; change the declaration instead",
        )


def _check_run(board: TaskBoard, spec: ScheduleSpec) -> None:
    """The task is registered and its arguments fit it, and are not too large."""
    checker = board.catalog.checkers.get(spec.task)
    if checker is None:
        raise Rejected(
            ErrorCode.UNKNOWN_TASK,
            f"schedule {spec.name!r}: no subworker has registered a task named {spec.task!r}",
            task_name=spec.task,
        )
    for what, value in (("args", spec.args), ("kwargs", spec.kwargs)):
        if value and nesting_depth(value, MAX_NESTING) > MAX_NESTING:
            raise Rejected(
                ErrorCode.INVALID_ARGUMENTS,
                f"schedule {spec.name!r}: {what} nest more than {MAX_NESTING} deep",
                task_name=spec.task,
            )
    size = len(_encoder.encode(spec.args)) + len(_encoder.encode(spec.kwargs))
    if size > MAX_ARGUMENT_BYTES:
        raise Rejected(
            ErrorCode.INVALID_ARGUMENTS,
            f"schedule {spec.name!r}: its arguments take {size} bytes, more than the "
            f"{MAX_ARGUMENT_BYTES} a schedule may hold",
            task_name=spec.task,
        )
    problem = checker.problem(spec.args, spec.kwargs)
    if problem is not None:
        raise Rejected(
            ErrorCode.INVALID_ARGUMENTS, f"schedule {spec.name!r}: {problem}", task_name=spec.task
        )
