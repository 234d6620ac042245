"""What the board says of its named queues and limits: for ``fastworker queues``, the HTTP
API, the dashboard and the metrics. Read-only, no I/O.

A task *waits on a limit* while it is queued and cannot start because of one: its name's
rate or concurrency is spent, its queue's is, or it is parked on its concurrency key.
"""

from __future__ import annotations

from collections import Counter

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.limits import Scope
from fastworker_control_plane.core.queue_controls import queue_names
from fastworker_protocol import DEFAULT_QUEUE, LimitInfo, Priority, QueueInfo, TaskState


def waiting_on_limits(board: TaskBoard, now: float) -> Counter[tuple[str, str]]:
    """Per (queue, task name), the queued tasks a limit holds back now."""
    waiting: Counter[tuple[str, str]] = Counter()
    closed_names = board.limits.closed_names(now)
    for queue in board.queues.names():
        line = board.queues.line(queue)
        if line is None:
            continue
        queue_closed = not board.limits.queue_open(queue, now)
        for name, count in line.per_name.items():
            if queue_closed or name in closed_names:
                waiting[(queue, name)] += count
    for record in board.queues.parked():
        waiting[(record.queue, record.name)] += 1
    return waiting


def queue_infos(board: TaskBoard, now: float, *, with_default: bool = False) -> list[QueueInfo]:
    """Every queue the board knows (``with_default``: the default queue even when not)."""
    waiting = waiting_on_limits(board, now)
    running: Counter[str] = Counter()
    for slot in board.workers:
        for task_id in slot.in_flight:
            record = board.record(task_id, now, count=False)
            if record is not None and record.state in (TaskState.ASSIGNED, TaskState.RUNNING):
                running[record.queue] += 1
    infos = []
    names = queue_names(board)
    if with_default and DEFAULT_QUEUE not in names:
        names.insert(0, DEFAULT_QUEUE)
    for queue in names:
        limit = board.limits.get(Scope.QUEUE, queue)
        infos.append(
            QueueInfo(
                name=queue,
                depth={str(p): board.queues.queue_depth(queue, p) for p in Priority.by_rank()},
                oldest_age=_oldest_age(board, queue, now),
                running=running[queue],
                workers=sum(1 for slot in board.workers if queue in slot.queues),
                paused=queue in board.queues.paused,
                rate_limit=None if limit is None else limit.rate,
                concurrency_limit=None if limit is None else limit.concurrency,
                waiting_on_limits=sum(n for (q, _), n in waiting.items() if q == queue),
            )
        )
    return infos


def _oldest_age(board: TaskBoard, queue: str, now: float) -> float | None:
    """How long the longest-waiting task queued in ``queue`` has waited (the heads of its
    lines and its parked tasks are the candidates)."""
    line = board.queues.line(queue)
    heads = [] if line is None else line.heads()
    stamps = [
        record.queued_at
        for task_id in heads
        if (record := board.record(task_id, now, count=False)) is not None
        and record.state == TaskState.QUEUED
    ]
    stamps += [r.queued_at for r in board.queues.parked(queue)]
    return max(0.0, now - min(stamps)) if stamps else None


def limit_infos(board: TaskBoard, now: float) -> list[LimitInfo]:
    waiting = waiting_on_limits(board, now)
    infos = []
    for (scope, name), limit in sorted(board.limits.items(), key=lambda item: item[0]):
        if limit.rate is None and limit.concurrency is None:
            continue  # lifted; kept only to count its running tasks out
        index = 0 if scope == Scope.QUEUE else 1
        infos.append(
            LimitInfo(
                scope=str(scope),
                name=name,
                rate_limit=limit.rate,
                concurrency_limit=limit.concurrency,
                concurrency_key=board.limits.key_of(name) if scope == Scope.TASK else None,
                overridden=(scope, name) in board.limits.settings,
                running=limit.running_total(),
                waiting=sum(n for key, n in waiting.items() if key[index] == name),
            )
        )
    return infos
