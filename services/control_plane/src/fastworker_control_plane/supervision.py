"""Supervising the control plane's long-lived asyncio tasks (the journal writer, the
upkeep loop, the discovery announcer's loops).

Such a task must run until the control plane stops. One that ends before then, with an
exception or by returning, leaves the process half alive: acknowledgements that never
come, results never swept, peers never told where to connect, while ``/readyz`` says
ready. So its end is a fault: logged with its traceback, handed to the task's own
``cleanup`` (the journal fails every wait on it), and reported once to ``on_fault``,
which makes the control plane unready and stop with an error. Never swallow it here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger(__name__)

Cleanup = Callable[[BaseException], None]


class TaskDied(RuntimeError):
    """A task that had to keep running ended (the message says which, and how)."""


@dataclass(frozen=True)
class Fault:
    name: str
    error: BaseException

    def __str__(self) -> str:
        return f"{self.name} failed: {type(self.error).__name__}: {self.error}"


class Supervisor:
    """Watches tasks; the first that ends before ``stopping`` is the fault."""

    def __init__(self, on_fault: Callable[[Fault], None]) -> None:
        self._on_fault = on_fault
        self._tasks: list[asyncio.Task[Any]] = []
        self.stopping = False
        self.fault: Fault | None = None

    def spawn(
        self, name: str, coroutine: Coroutine[Any, Any, None], cleanup: Cleanup | None = None
    ) -> asyncio.Task[None]:
        """Run ``coroutine`` as a supervised task."""
        return self.watch(name, asyncio.get_running_loop().create_task(coroutine), cleanup)

    def watch(
        self, name: str, task: asyncio.Task[Any], cleanup: Cleanup | None = None
    ) -> asyncio.Task[Any]:
        """Supervise a task someone else started."""
        self._tasks.append(task)
        task.add_done_callback(lambda done: self._ended(name, done, cleanup))
        return task

    def stop(self) -> None:
        """From now on tasks are expected to end (their owners close them)."""
        self.stopping = True

    def _ended(self, name: str, task: asyncio.Task[Any], cleanup: Cleanup | None) -> None:
        if self.stopping and (task.cancelled() or task.exception() is None):
            return
        error = _why(task)
        if cleanup is not None:
            cleanup(error)
        self.report(name, error)

    def report(self, name: str, error: BaseException) -> None:
        """A supervised piece of work failed in a way the process cannot go on from."""
        log.error(
            "a control plane task died",
            task=name,
            error=f"{type(error).__name__}: {error}",
            exc_info=error,
        )
        if self.fault is None:
            self.fault = Fault(name, error)
            self._on_fault(self.fault)


def _why(task: asyncio.Task[Any]) -> BaseException:
    if task.cancelled():
        return TaskDied("it was cancelled")
    error = task.exception()
    return error if error is not None else TaskDied("it returned, and must run until stopped")
