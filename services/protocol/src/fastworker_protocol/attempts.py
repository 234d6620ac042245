"""Retries, and one task's life by the rules a control plane's board applies.

``RetryPolicy`` decides whether and when a failed attempt is tried again, with
exponential backoff and full jitter: the n-th retry waits a time drawn uniformly from
``[0, min(cap, base * 2 ** (n - 1))]`` (AWS's "full jitter"), so retries of many failing
tasks spread out instead of arriving together; the random source is handed in. Which
exceptions ``retry_on`` covers is decided by the subworker, which still has the exception
and checks it with ``isinstance`` (so subclasses match), and arrives as the outcome's
``retryable``; only for outcomes without that verdict (older or other-language
subworkers) does the policy fall back to comparing class names. The control plane's board
and ``eager()`` both apply it.

``Life`` is one task's life under ``eager()``, moved by the same rules.

Its states go through the transition table of ``fastworker_protocol.states`` (the table the
board's records apply), so an eager task can only be where a real one can: queued (or
scheduled and then due: eager mode waits for no ETA), assigned and started for each
attempt, then succeeded, failed, or failed and retried. Its attempts are counted as the
board counts them (one per assignment), and a failure is retried as the board retries it:
only an exception (not a timeout or an unsendable result) that ``retry_on`` covers, while
fewer than ``max_retries`` retries were made (a negative number counting as none). The
final error lists every attempt's only when there were retries, as on the board.

The retry rule and the summary are the board's own (below); the shared scenario table
(``tests/integration/test_scenarios.py``) holds eager and the real board to the same
outcomes. Pure: no clock, no I/O, no entropy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastworker_protocol.messages import TaskError, TaskSignature
from fastworker_protocol.reasons import FailureReason
from fastworker_protocol.states import TaskEvent, TaskState, next_task_state

Uniform = Callable[[float, float], float]
MAX_RETRY_DELAY = 366 * 24 * 3600.0  # the longest delay a task may ask before its retry


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
        ``retryable`` is the subworker's ``retry_on`` verdict, ``None`` if it gave none).
        A task that asked for a retry (reason ``retry``) gets one whatever ``retry_on``
        says, while retries are left."""
        limit = self.max_retries if max_retries is None else max(0, max_retries)
        if retries_so_far >= limit:
            return False
        if error.reason == FailureReason.RETRY:
            return True
        if error.reason != FailureReason.EXCEPTION:
            return False
        if retryable is not None:
            return retryable
        return not self.retry_on or error.type in self.retry_on

    def delay(self, retry: int, uniform: Uniform, asked: float | None = None) -> float:
        """Seconds before retry number ``retry`` (1 for the first retry): the delay the
        task ``asked`` for (bounded to ``[0, MAX_RETRY_DELAY]``), else the backoff."""
        if asked is not None and asked == asked:  # NaN asks for nothing
            return min(max(0.0, asked), MAX_RETRY_DELAY)
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


class Life:
    """The state, attempts and errors of one task (see the module)."""

    def __init__(self, max_retries: int, *, delayed: bool) -> None:
        self.state = TaskState.PENDING
        self.attempts = 0
        self._policy = RetryPolicy(max_retries=max(0, max_retries))
        self._retried: list[TaskError] = []  # the errors of the attempts retried
        if delayed:
            self._on(TaskEvent.SCHEDULE)
            self._on(TaskEvent.DUE)
        else:
            self._on(TaskEvent.ENQUEUE)

    def start(self) -> int:
        """An attempt begins; its number."""
        self._on(TaskEvent.ASSIGN)
        self._on(TaskEvent.START)
        self.attempts += 1
        return self.attempts

    def succeeded(self) -> None:
        self._on(TaskEvent.SUCCEED)

    def failed(self, error: TaskError, retryable: bool) -> bool:
        """The attempt failed with ``error`` (``retryable``: ``retry_on`` covers it);
        whether the task is tried again."""
        self._on(TaskEvent.FAIL)
        retried = self._policy.retries(error, len(self._retried), None, retryable)
        if retried:
            self._retried.append(error)
            self._on(TaskEvent.RETRY)
            self._on(TaskEvent.DUE)
        return retried

    def errors(self, last: TaskError | None) -> tuple[TaskError | None, list[TaskError]]:
        """The result's error and attempt errors, the last attempt's error being ``last``
        (``None`` if it succeeded)."""
        if last is None:
            return None, list(self._retried)
        if not self._retried:
            return last, []
        every = [*self._retried, last]
        return summarized(last, every), every

    def _on(self, event: TaskEvent) -> None:
        self.state = next_task_state(self.state, event)
