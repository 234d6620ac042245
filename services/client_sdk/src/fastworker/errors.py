"""The exceptions the SDK raises, grouped by what the caller can do about it.

FastWorkerError
+-- ControlPlaneUnavailable    nothing connected or answered (or it is not the leader any
|                              more, ``unavailable``): start one, fix the address, retry
+-- Timeout (TimeoutError)     it answered, but not within the time you gave
+-- RequestRejected            the control plane refused the request (has ``.code``)
|   +-- UnknownTask            no subworker ever registered that task name
|   +-- InvalidArguments       args/kwargs do not fit the task's signature (or cannot be sent)
|   |   +-- MessageTooLarge    the request is over the message size limit (``oversize``)
|   +-- TaskNotFound           no such task id (never existed, or expired)
+-- TaskFailed                 the task ran and raised (remote type, message, traceback)
+-- TaskCancelled              the task was cancelled before it finished

SoftTimeLimitExceeded is not raised by the SDK but inside a task: see ``@task``.

Every FastWorker process shares this tree, so it is defined in ``fastworker_common.errors``;
this module is its public face.
"""

from fastworker_common.errors import (
    ControlPlaneUnavailable,
    FastWorkerError,
    InvalidArguments,
    LeaderUnavailable,
    MessageTooLarge,
    QueueFull,
    RequestRejected,
    SoftTimeLimitExceeded,
    TaskCancelled,
    TaskFailed,
    TaskNotFound,
    Timeout,
    Unauthorized,
    UnknownTask,
)

__all__ = [
    "ControlPlaneUnavailable",
    "FastWorkerError",
    "InvalidArguments",
    "LeaderUnavailable",
    "MessageTooLarge",
    "QueueFull",
    "RequestRejected",
    "SoftTimeLimitExceeded",
    "TaskCancelled",
    "TaskFailed",
    "TaskNotFound",
    "Timeout",
    "Unauthorized",
    "UnknownTask",
]
