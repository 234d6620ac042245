"""Retrying from inside a task: ``fastworker.retry(countdown=..., exc=...)``.

Celery's ``self.retry(exc=..., countdown=...)`` without a bound ``self``: the task raises
:class:`Retry`, the subworker reports the attempt as failed with reason ``retry`` and the
delay asked for, and the control plane tries it again after that delay, as long as the
task has retries left (its ``max_retries``, or the submission's). Its ``retry_on`` does
not apply: asking is explicit. Once no retry is left the task fails, with ``exc`` as its
error when one was given.
"""

from __future__ import annotations

import traceback
from datetime import timedelta
from typing import NoReturn

from fastworker_protocol import FailureReason, TaskError


class Retry(Exception):
    """Raised inside a task to have it tried again: after ``countdown`` seconds (or the
    task's backoff when ``None``), as a retry of ``exc`` when given (the error the task
    fails with once no retry is left), for ``reason`` (shown on the attempt's error)."""

    def __init__(
        self,
        reason: str | None = None,
        *,
        countdown: float | timedelta | None = None,
        exc: BaseException | None = None,
    ) -> None:
        self.countdown = _seconds(countdown)
        self.exc = exc
        self.reason = reason or (str(exc) if exc is not None else "retry asked for")
        super().__init__(self.reason)


def retry(
    reason: str | None = None,
    *,
    countdown: float | timedelta | None = None,
    exc: BaseException | None = None,
) -> NoReturn:
    """Try the running task again (see :class:`Retry`); never returns. ``raise retry()``
    reads as Celery's ``raise self.retry()`` and does the same."""
    raise Retry(reason, countdown=countdown, exc=exc)


def _seconds(countdown: float | timedelta | None) -> float | None:
    seconds = countdown.total_seconds() if isinstance(countdown, timedelta) else countdown
    if seconds is not None and not 0 <= seconds < float("inf"):
        raise ValueError(f"countdown must be 0 or more seconds, not {countdown!r}")
    return None if seconds is None else float(seconds)


def retry_error(asked: Retry) -> TaskError:
    """The error of an attempt that asked for a retry: ``exc``'s type and traceback when it
    gave one (the error the task ends with when no retry is left), its reason as message."""
    cause = asked.exc
    return TaskError(
        type="Retry" if cause is None else type(cause).__name__,
        message=asked.reason,
        traceback="".join(traceback.format_exception(cause if cause is not None else asked)),
        reason=FailureReason.RETRY,
    )
