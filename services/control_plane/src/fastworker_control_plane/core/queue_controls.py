"""What an operator does to named queues and limits at run time: pause, resume, purge,
change a limit. No I/O; the board's ``controls_version`` tells the journal to write the
controls again (``durability.entries.controls``)."""

from __future__ import annotations

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.effects import Effects
from fastworker_control_plane.core.limits import Scope
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import ErrorCode, TaskState, check_queue


def queue_names(board: TaskBoard) -> list[str]:
    """Every queue known: holding tasks, named by a registration, served by a worker,
    paused or limited."""
    names = set(board.queues.names()) | board.queues.paused
    names.update(signature.queue for signature in board.catalog.signatures.values())
    names.update(queue for slot in board.workers for queue in slot.queues)
    names.update(name for (scope, name) in board.limits.settings if scope == Scope.QUEUE)
    return sorted(names)


def pause(board: TaskBoard, queue: str, paused: bool) -> bool:
    """Stop (or restart) dispatch from ``queue``; returns whether that changed it."""
    if (queue in board.queues.paused) == paused:
        return False
    if paused:
        board.queues.paused.add(queue)
    else:
        board.queues.paused.discard(queue)
    board.controls_version += 1
    return True


def purge(board: TaskBoard, queue: str, now: float, *, record: bool = False) -> Effects:
    """Cancel every task queued in ``queue`` (parked ones included; not running, delayed
    or retrying ones): they are the effects' ``finished``."""
    line = board.queues.line(queue)
    ids = [] if line is None else line.ids()
    ids += [task.id for task in board.queues.parked(queue)]
    fx = Effects(record)
    for task_id in ids:
        task = board.record(task_id, now, count=False)
        if task is not None and task.state == TaskState.QUEUED:
            fx.add(board.cancel(task_id, now, record=record)[1])
    return fx


def set_limit(
    board: TaskBoard,
    scope: Scope,
    name: str,
    rate: str | None,
    concurrency: int | None,
    *,
    reset: bool = False,
) -> str:
    """Change a queue's or a task name's limits at run time (``Limits.change``); returns
    the name changed: a task's full name when a short one stands for it
    (``Catalog.resolve``; a name no subworker registered yet is kept as given)."""
    if scope == Scope.TASK:
        name = board.catalog.resolve(name)
    try:
        if scope == Scope.QUEUE:
            check_queue(name)
        board.limits.change(scope, name, rate, concurrency, reset=reset)
    except ValueError as exc:
        raise Rejected(ErrorCode.INVALID_MESSAGE, str(exc)) from None
    board.controls_version += 1
    if scope == Scope.TASK:  # a raised limit may let parked tasks go
        board.queues.unpark(name, None, board.is_queued)
    return name


def next_limit_due(board: TaskBoard, now: float) -> float | None:
    """When a spent rate limit next lets a queued task go (``None``: none waits)."""
    return board.limits.next_token_at(now) if len(board.queues) else None
