"""Signals: your code, called around every task attempt and as worker processes start and
stop, wherever tasks run (a subworker, the control plane's embedded one, a process pool's
child, ``eager()``). What Celery's signals and Dramatiq's middleware are used for: metrics,
database connections, error reporting.

from fastworker import signals

@signals.task_failure
def report(failure: signals.TaskFailure) -> None:
    sentry_sdk.capture_exception(failure.exception)

The rules (the guide, docs/guides/signals.md, says why):

* a handler takes one argument, the frozen event of its signal;
* a sync handler runs in the thread that runs the task (a thread-pool thread, the event
  loop's thread for an async task, a child's main thread), so thread-local state such as a
  Django connection is the task's own;
* an ``async def`` handler is awaited around **async tasks only**, on the loop and in the
  context of the task; sync tasks run no loop to await it on, so they call sync handlers
  only. The worker signals await async handlers everywhere;
* within one signal, sync handlers run before async ones, each in registration order;
  ``task_failure`` fires before ``task_postrun``;
* a handler that raises is logged and skipped: it never fails, retries or loses the task.

With no handler connected, a task run pays one attribute check.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fastworker_protocol import Priority, TaskError, TaskState

__all__ = [
    "Signal",
    "TaskFailure",
    "TaskFinished",
    "TaskRun",
    "WorkerProcess",
    "task_failure",
    "task_postrun",
    "task_prerun",
    "task_retry",
    "worker_process_init",
    "worker_shutdown",
]

E = TypeVar("E")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class TaskRun:
    """One attempt of a task, as it starts (``task_prerun``) and in every later event.

    ``attempt`` counts from 1 (retries and redeliveries each add one); ``id`` is the same
    for every attempt. ``worker_id`` is the subworker running it (``"eager"`` in eager mode).
    """

    id: str
    name: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    attempt: int
    queue: str
    priority: Priority | None
    eta: float | None
    headers: Mapping[str, str]
    worker_id: str


@dataclass(frozen=True, slots=True)
class TaskFinished:
    """An attempt's end (``task_postrun``). ``state`` is ``SUCCESS`` (``result`` is what the
    task returned), ``FAILURE`` (``error`` says why; ``exception`` is the exception object
    when one was raised in this process), ``RETRYING`` (it raised ``fastworker.Retry``) or
    ``CANCELLED`` (an async task stopped by its time limit, a cancel or a drain). A failed
    attempt may still be retried: see ``TaskFailure``."""

    task: TaskRun
    state: TaskState
    result: Any
    error: TaskError | None
    exception: BaseException | None
    duration: float  # seconds, this attempt only


@dataclass(frozen=True, slots=True)
class TaskFailure:
    """A failed attempt (``task_failure``), or one that asked for a retry (``task_retry``).
    ``error`` holds the type, message and formatted
    traceback the control plane stores; ``exception`` is the live object (``None`` when the
    failure raised nothing here: a result that cannot be sent).

    ``retryable`` is the task's ``retry_on`` verdict: ``False`` means no retry will follow;
    ``True`` means the control plane retries it if ``max_retries`` leaves an attempt (under
    ``eager()`` that is known: ``will_retry``); ``None``: not decided here."""

    task: TaskRun
    error: TaskError
    exception: BaseException | None
    retryable: bool | None
    will_retry: bool | None = None


@dataclass(frozen=True, slots=True)
class WorkerProcess:
    """A process that runs tasks (``worker_process_init``, ``worker_shutdown``): a subworker
    (standalone, or the one a control plane embeds), or one child of a process pool."""

    worker_id: str
    pid: int
    child: bool  # a process pool's child, rather than the subworker itself


class Signal(Generic[E]):
    """Handlers to call with an ``E``. Use it as a decorator (``@signals.task_prerun``) or
    ``connect(fn)``; ``disconnect(fn)`` removes one. Connecting the same function twice
    keeps one registration."""

    def __init__(self, name: str, *, per_task: bool) -> None:
        self.name = name
        self.per_task = per_task
        self.sync: tuple[Callable[[E], Any], ...] = ()
        self.awaited: tuple[Callable[[E], Awaitable[Any]], ...] = ()

    def __repr__(self) -> str:
        return f"<signal {self.name}: {len(self.handlers)} handler(s)>"

    def __call__(self, fn: Callable[[E], R]) -> Callable[[E], R]:
        return self.connect(fn)

    def connect(self, fn: Callable[[E], R]) -> Callable[[E], R]:
        """Register ``fn`` (returned unchanged, so this works as a decorator)."""
        if not callable(fn):
            raise TypeError(
                f"signals.{self.name}: a handler must be a function taking one argument, got {fn!r}"
            )
        with _lock:
            if fn in self.sync or fn in self.awaited:
                return fn
            if inspect.iscoroutinefunction(fn):
                self.awaited = (*self.awaited, fn)
            else:
                self.sync = (*self.sync, fn)
            _rearm()
        return fn

    def disconnect(self, fn: Callable[..., Any]) -> bool:
        """Remove ``fn``; whether it was connected."""
        with _lock:
            found = fn in self.sync or fn in self.awaited
            self.sync = tuple(h for h in self.sync if h != fn)
            self.awaited = tuple(h for h in self.awaited if h != fn)
            _rearm()
        return found

    @property
    def handlers(self) -> tuple[Callable[..., Any], ...]:
        return (*self.sync, *self.awaited)


task_prerun: Signal[TaskRun] = Signal("task_prerun", per_task=True)
"""Before each attempt, in the task's thread (and context: ``current_task()`` is set)."""

task_postrun: Signal[TaskFinished] = Signal("task_postrun", per_task=True)
"""After each attempt, whatever its end (after ``task_failure`` for a failed one)."""

task_failure: Signal[TaskFailure] = Signal("task_failure", per_task=True)
"""After each failed attempt, before ``task_postrun``."""

task_retry: Signal[TaskFailure] = Signal("task_retry", per_task=True)
"""Instead of ``task_failure``, after an attempt that asked to be retried (raised
``fastworker.Retry``); the control plane retries it while ``max_retries`` allows."""

worker_process_init: Signal[WorkerProcess] = Signal("worker_process_init", per_task=False)
"""Once per worker start in a process, before it runs a task: a subworker's ``run`` (the
``fastworker-subworker`` process, the control plane when it runs tasks itself, an in-process
test ``Cluster``), and each child of a process pool."""

worker_shutdown: Signal[WorkerProcess] = Signal("worker_shutdown", per_task=False)
"""Once per worker end, after its last task: a subworker's drain, a child's exit."""

SIGNALS: tuple[Signal[Any], ...] = (
    task_prerun,
    task_postrun,
    task_failure,
    task_retry,
    worker_process_init,
    worker_shutdown,
)

_lock = threading.Lock()
armed = False  # some task signal has a handler: runners check this one flag per task


def _rearm() -> None:
    global armed
    armed = any(s.handlers for s in SIGNALS if s.per_task)


def handler_modules() -> list[str]:
    """The modules the connected handlers were defined in (a process pool's child imports
    them, so handlers connected in a module without process tasks fire there too)."""
    modules = {getattr(h, "__module__", None) for s in SIGNALS for h in s.handlers}
    return sorted(m for m in modules if isinstance(m, str) and m != "__main__")
