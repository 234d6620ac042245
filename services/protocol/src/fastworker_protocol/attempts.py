"""One task's life by the rules a control plane's board applies (``eager()`` runs tasks by it).

Its states go through the transition table of ``fastworker_protocol.states`` (the table the
board's records apply), so an eager task can only be where a real one can: queued (or
scheduled and then due: eager mode waits for no ETA), assigned and started for each
attempt, then succeeded, failed, or failed and retried. Its attempts are counted as the
board counts them (one per assignment), and a failure is retried as the board retries it:
only an exception (not a timeout or an unsendable result) that ``retry_on`` covers, while
fewer than ``max_retries`` retries were made (a negative number counting as none). The
final error lists every attempt's only when there were retries, as on the board.

The retry rule and the summary are the board's (``core/retry_policy`` of the control
plane), which the client cannot import: they are restated here, and the shared scenario
table (``tests/integration/test_scenarios.py``) holds the two to the same outcomes. Pure:
no clock, no I/O.
"""

from __future__ import annotations

from fastworker_protocol import FailureReason, TaskError, TaskState
from fastworker_protocol.states import TaskEvent, next_task_state


class Life:
    """The state, attempts and errors of one task (see the module)."""

    def __init__(self, max_retries: int, *, delayed: bool) -> None:
        self.state = TaskState.PENDING
        self.attempts = 0
        self._max_retries = max(0, max_retries)
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
        retried = (
            retryable
            and error.reason == FailureReason.EXCEPTION
            and len(self._retried) < self._max_retries
        )
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
        return _summarized(last, every), every

    def _on(self, event: TaskEvent) -> None:
        self.state = next_task_state(self.state, event)


def _summarized(last: TaskError, errors: list[TaskError]) -> TaskError:
    """The last attempt's error, its message followed by every attempt's."""
    lines = "; ".join(f"attempt {n}: {e.type}: {e.message}" for n, e in enumerate(errors, 1))
    return TaskError(
        type=last.type,
        message=f"{last.message} (after {len(errors)} attempts: {lines})",
        traceback=last.traceback,
        reason=last.reason,
    )
