"""FastWorker: a brokerless distributed task queue. This is the application-facing SDK.

from fastworker import task, Client

@task
def add(x: int, y: int) -> int:
    return x + y

async with Client() as client:
    result = await client.submit_task("add", args=(2, 3))

Its names are imported on first use, so a module of the SDK loads only what it imports
itself: the ``fastworker`` command's parser starts without the client, NNG or msgpack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from fastworker.handles import AsyncTaskHandle, AsyncWorkflowHandle, TaskHandle, WorkflowHandle
    from fastworker.retrying import Retry, retry
    from fastworker.sync_client import SyncClient
    from fastworker.tls import TLS, TLSError
    from fastworker_common.context import TaskContext, current_task
    from fastworker_protocol import (
        DeadLetter,
        Priority,
        Retried,
        ScheduleInfo,
        TaskError,
        TaskResult,
        register_type,
    )
    from fastworker_protocol import TaskState as TaskStatus

__version__ = "0.1.0"

__all__ = [
    "TLS",
    "AsyncTaskHandle",
    "AsyncWorkflowHandle",
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
    "Retry",
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
    "TaskHandle",
    "TaskNotFound",
    "TaskPage",
    "TaskRegistry",
    "TaskResult",
    "TaskStatus",
    "Timeout",
    "Unauthorized",
    "UnknownTask",
    "Workflow",
    "WorkflowHandle",
    "__version__",
    "chain",
    "chord",
    "configure",
    "current_task",
    "default_client",
    "default_registry",
    "group",
    "register_type",
    "retry",
    "sig",
    "task",
    "unwrap",
]

_HOMES = {
    "fastworker._default": ("configure", "default_client"),
    "fastworker._operations": ("FailedPage", "Retries"),
    "fastworker.retrying": ("Retry", "retry"),
    "fastworker._task": ("Task", "TaskRegistry", "default_registry", "task"),
    "fastworker.canvas": ("Signature", "Workflow", "chain", "chord", "group", "sig"),
    "fastworker.handles": (
        "AsyncTaskHandle",
        "AsyncWorkflowHandle",
        "TaskHandle",
        "WorkflowHandle",
    ),
    "fastworker.client": ("BatchItem", "Client", "TaskPage", "unwrap"),
    "fastworker.errors": (
        "ControlPlaneUnavailable",
        "FastWorkerError",
        "InvalidArguments",
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
    ),
    "fastworker.sync_client": ("SyncClient",),
    "fastworker.tls": ("TLS", "TLSError"),
    "fastworker_common.context": ("TaskContext", "current_task"),
    "fastworker_protocol": (
        "DeadLetter",
        "Priority",
        "Retried",
        "ScheduleInfo",
        "TaskError",
        "TaskResult",
        "TaskStatus",
        "register_type",
    ),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}
_RENAMED = {"TaskStatus": "TaskState"}  # the protocol's name for it


def __getattr__(name: str) -> Any:
    home = _HOME_OF.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
