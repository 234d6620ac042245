"""FastWorker: a brokerless distributed task queue. This is the application-facing SDK.

from fastworker import task, Client

@task
def add(x: int, y: int) -> int:
    return x + y

async with Client() as client:
    result = await client.submit_task("add", args=(2, 3))
"""

from fastworker._default import configure, default_client
from fastworker._operations import FailedPage, Retries
from fastworker._task import Task, TaskRegistry, default_registry, task
from fastworker.canvas import Signature, Workflow, chain, chord, group, sig
from fastworker.client import BatchItem, Client, TaskPage, unwrap
from fastworker.errors import (
    ControlPlaneUnavailable,
    FastWorkerError,
    InvalidArguments,
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
from fastworker.sync_client import SyncClient
from fastworker.tls import TLS, TLSError
from fastworker_common import nng_exit  # noqa: F401  (before any pynng object exists)
from fastworker_common.context import TaskContext, current_task
from fastworker_protocol import DeadLetter, Priority, Retried, ScheduleInfo, TaskError, TaskResult
from fastworker_protocol import TaskState as TaskStatus

__version__ = "0.1.0"

__all__ = [
    "TLS",
    "BatchItem",
    "Client",
    "ControlPlaneUnavailable",
    "DeadLetter",
    "FailedPage",
    "FastWorkerError",
    "InvalidArguments",
    "MessageTooLarge",
    "Priority",
    "QueueFull",
    "RequestRejected",
    "Retried",
    "Retries",
    "ScheduleInfo",
    "Signature",
    "SoftTimeLimitExceeded",
    "SyncClient",
    "TLSError",
    "Task",
    "TaskCancelled",
    "TaskContext",
    "TaskError",
    "TaskFailed",
    "TaskNotFound",
    "TaskPage",
    "TaskRegistry",
    "TaskResult",
    "TaskStatus",
    "Timeout",
    "Unauthorized",
    "UnknownTask",
    "Workflow",
    "__version__",
    "chain",
    "chord",
    "configure",
    "current_task",
    "default_client",
    "default_registry",
    "group",
    "sig",
    "task",
    "unwrap",
]
