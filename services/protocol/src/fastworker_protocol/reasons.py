"""Why an attempt failed: the values of ``TaskError.reason``.

On the wire a reason is its plain string, and ``TaskError.reason`` stays typed ``str``, so
a peer that sends a reason this version does not know is still understood (the version
rule: additive changes never break an older peer). Compare against the members, never
against string literals.
"""

from __future__ import annotations

from enum import StrEnum


class FailureReason(StrEnum):
    """How an attempt failed. Members equal their wire strings
    (``FailureReason.TIMEOUT == "timeout"``)."""

    EXCEPTION = "exception"  # the task raised
    RETRY = "retry"  # the task asked to be tried again (``fastworker.retry``, ``raise Retry``)
    UNSERIALIZABLE_RESULT = "unserializable_result"  # its return value has no msgpack form
    TIMEOUT = "timeout"  # it ran past its timeout and was stopped
    CANCELLED = "cancelled"  # it was cancelled before or while it ran
    INTERRUPTED = "interrupted"  # its subworker shut down first (the task is redelivered)
    WORKER_LOST = "worker_lost"  # its subworkers were lost more times than allowed
    WORKER_CRASHED = "worker_crashed"  # the child process running it died (redelivered)
