"""The outcomes of attempts that did not run to their end: stopped by a time limit or a
cancel, handed back by a shutdown, or cut short by the death of their child process."""

from __future__ import annotations

import time

from fastworker_protocol import Assignment, FailureReason, Outcome, TaskError


def stopped(assignment: Assignment, reason: FailureReason, *, ran: bool = True) -> Outcome:
    """The outcome of a task stopped by its timeout or by cancellation (``ran``: it had
    started on its thread, event loop or child)."""
    if reason == FailureReason.TIMEOUT:
        error = TaskError(
            type="Timeout",
            reason=reason,
            message=f"the task ran longer than its {assignment.time_limit:g} s timeout",
        )
    else:
        when = "while it ran" if ran else "before it started"
        error = TaskError(type="Cancelled", reason=reason, message=f"the task was cancelled {when}")
    return Outcome(task_id=assignment.id, ok=False, error=error, finished_at=time.time())


def cancelled_before_start(assignment: Assignment) -> Outcome:
    return stopped(assignment, FailureReason.CANCELLED, ran=False)


def interrupted(task_id: str) -> Outcome:
    """Handed back for redelivery: the attempt was cut short, it did not fail."""
    return Outcome(
        task_id=task_id,
        ok=False,
        requeue=True,
        error=TaskError(
            type="Interrupted",
            reason=FailureReason.INTERRUPTED,
            message="the subworker shut down before the task finished",
        ),
    )


def crashed(assignment: Assignment, pid: int, how: str, started_at: float) -> Outcome:
    """The child process running the task died (``how``: ``signal SIGSEGV``, ``exit code
    1``...). The control plane delivers it again, as for a lost subworker."""
    error = TaskError(
        type="WorkerCrashed",
        reason=FailureReason.WORKER_CRASHED,
        message=f"the child process (pid {pid}) running the task died: {how}",
    )
    return Outcome(
        task_id=assignment.id,
        ok=False,
        error=error,
        started_at=started_at,
        finished_at=time.time(),
    )
