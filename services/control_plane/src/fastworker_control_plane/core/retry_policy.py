"""Whether and when a failed attempt is tried again: exponential backoff with full jitter.

The n-th retry waits a time drawn uniformly from ``[0, min(cap, base * 2 ** (n - 1))]``
(AWS's "full jitter"), so retries of many failing tasks spread out instead of arriving
together. The random source is injected, so tests can fix it.

Which exceptions ``retry_on`` covers is decided by the subworker, which still has the
exception and checks it with ``isinstance`` (so subclasses match), and arrives as the
outcome's ``retryable``. Only for outcomes without that verdict (older or other-language
subworkers) does the policy fall back to comparing class names. The budget (how many
retries) and the backoff stay here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fastworker_control_plane.core.entropy import Uniform
from fastworker_protocol import FailureReason, Outcome, TaskError, TaskSignature


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 0
    backoff: float = 1.0
    backoff_max: float = 600.0
    retry_on: frozenset[str] = frozenset()

    @classmethod
    def of(cls, signature: TaskSignature) -> RetryPolicy:
        return cls(
            max(0, signature.max_retries),
            max(0.0, signature.retry_backoff),
            max(0.0, signature.retry_backoff_max),
            frozenset(signature.retry_on),
        )

    def retries(
        self,
        error: TaskError,
        retries_so_far: int,
        max_retries: int | None,
        retryable: bool | None = None,
    ) -> bool:
        """Whether a failure with ``error`` is retried (``max_retries`` overrides ours;
        ``retryable`` is the subworker's ``retry_on`` verdict, ``None`` if it gave none)."""
        limit = self.max_retries if max_retries is None else max(0, max_retries)
        if retries_so_far >= limit or error.reason != FailureReason.EXCEPTION:
            return False
        if retryable is not None:
            return retryable
        return not self.retry_on or error.type in self.retry_on

    def delay(self, retry: int, uniform: Uniform) -> float:
        """Seconds before retry number ``retry`` (1 for the first retry)."""
        ceiling = min(self.backoff_max, self.backoff * 2 ** (retry - 1))
        return uniform(0.0, ceiling)


def summarized(last: TaskError, errors: list[TaskError]) -> TaskError:
    """The last attempt's error, its message followed by every attempt's."""
    lines = "; ".join(f"attempt {n}: {e.type}: {e.message}" for n, e in enumerate(errors, 1))
    return TaskError(
        type=last.type,
        message=f"{last.message} (after {len(errors)} attempts: {lines})",
        traceback=last.traceback,
        reason=last.reason,
    )


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
