"""What the board does with a task whose worker was lost or crashed. Whether and when a failed
attempt is tried again is ``fastworker_protocol.attempts.RetryPolicy``, the rule ``eager()``
also applies.
"""

from __future__ import annotations

from typing import Protocol

from fastworker_protocol import FailureReason, Outcome, TaskError


class Losses(Protocol):
    lost: int  # times a worker was lost while running the task
    returned: int  # times a lost worker held it without having started it


def crashed(outcome: Outcome) -> bool:
    """The process running the attempt died under it: delivered again like a lost worker."""
    return outcome.error is not None and outcome.error.reason == FailureReason.WORKER_CRASHED


def lost_reason(outcome: Outcome) -> FailureReason:
    """Why a task handed back (``requeue``) or crashed is delivered again."""
    return FailureReason.WORKER_CRASHED if crashed(outcome) else FailureReason.INTERRUPTED


def lost_too_often(
    task: Losses, reason: str, max_redeliveries: int, max_returns: int
) -> TaskError | None:
    """The ``worker_lost`` failure of a task whose workers were lost too often, or
    ``None`` while it may be delivered again."""
    if task.lost <= max_redeliveries and task.returned <= max_returns:
        return None
    if reason == FailureReason.WORKER_CRASHED:
        return TaskError(
            type="WorkerCrashed",
            message=f"the process running the task died {task.lost} times; giving up after "
            f"{max_redeliveries} redeliveries",
            reason=FailureReason.WORKER_CRASHED,
        )
    return TaskError(
        type="WorkerLost",
        message=f"the subworker holding the task was lost {task.lost + task.returned} times "
        f"(last: {reason}); giving up after {max_redeliveries} redeliveries of a started "
        f"task ({max_returns} of one never started)",
        reason=FailureReason.WORKER_LOST,
    )
