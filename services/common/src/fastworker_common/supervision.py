"""Supervising a server process's long-lived asyncio tasks: the one way FastWorker runs its
background loops (the control plane's journal writer, upkeep and discovery loops; a
replica's election watcher and follower link; an elector's campaign; a subworker's
exchange and discovery watch; the test cluster's subworkers).

Such a task runs until its owner ends it (``end``, or ``stop`` for all of them). What its
end before then means is the site's ``Policy``, said where it is spawned:

``STOP``
    The process cannot go on without it: its end, by an exception, by returning or by
    being cancelled, is a fault. Logged with its traceback, handed to the task's
    ``cleanup`` (say, to fail every wait on it) and reported once to ``on_fault``, which
    makes the owner stop with an error. Never swallow it.
``LOG``
    An exception is logged with its traceback; the process goes on without the task.
``keep`` with a ``Restart``
    The work is retried: an exception is logged and the work runs again ``delay`` seconds
    later (a return runs it again at once). An exception of a kind the supervisor was
    told is ``permanent`` (a wrong token: no retry can fix it) ends the retries and is a
    fault, as with ``STOP``.

A permanent error's fault is logged without its traceback: its message says what to fix.

Only the server processes import this (it logs with structlog).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger(__name__)

Cleanup = Callable[[BaseException], None]


class TaskDied(RuntimeError):
    """A task that had to keep running ended (the message says which, and how)."""


class Policy(enum.Enum):
    """What the end of a spawned task before its owner ends it means (module docstring)."""

    STOP = "stop"
    LOG = "log"


@dataclass(frozen=True)
class Restart:
    """How ``keep`` retries: ``expected`` errors are logged as a warning (no traceback),
    others with their traceback."""

    delay: float
    expected: tuple[type[Exception], ...] = ()


@dataclass(frozen=True)
class Fault:
    name: str
    error: BaseException

    def __str__(self) -> str:
        return f"{self.name} failed: {type(self.error).__name__}: {self.error}"


class Supervisor:
    """Watches tasks; the first fault among them is reported to ``on_fault`` (None: a
    supervisor of ``LOG`` tasks only). ``permanent``: the errors no retry can fix."""

    def __init__(
        self,
        on_fault: Callable[[Fault], None] | None = None,
        *,
        permanent: tuple[type[Exception], ...] = (),
    ) -> None:
        self._on_fault = on_fault
        self.permanent = permanent
        self._tasks: set[asyncio.Task[Any]] = set()  # the loop keeps only weak references
        self._ending: set[asyncio.Task[Any]] = set()
        self.stopping = False
        self.fault: Fault | None = None

    def spawn(
        self,
        name: str,
        coroutine: Coroutine[Any, Any, None],
        cleanup: Cleanup | None = None,
        *,
        policy: Policy = Policy.STOP,
    ) -> asyncio.Task[None]:
        """Run ``coroutine`` as a supervised task."""
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        return self.watch(name, task, cleanup, policy=policy)

    def watch(
        self,
        name: str,
        task: asyncio.Task[Any],
        cleanup: Cleanup | None = None,
        *,
        policy: Policy = Policy.STOP,
    ) -> asyncio.Task[Any]:
        """Supervise a task someone else started."""
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._ended(name, done, cleanup, policy))
        return task

    def keep(
        self, name: str, work: Callable[[], Awaitable[None]], restart: Restart
    ) -> asyncio.Task[None]:
        """Run ``work`` again and again, as ``restart`` says, until ended."""
        return self.spawn(name, _restarting(name, work, restart, self.permanent))

    async def end(self, task: asyncio.Task[Any] | None) -> None:
        """End one task on purpose (its end is no fault), and wait until it has."""
        if task is None or task.done():
            return
        self._ending.add(task)
        task.cancel()
        await asyncio.wait([task])  # its error is no one's (the caller's own cancel is)

    def stop(self) -> None:
        """From now on tasks are expected to end (their owners close them)."""
        self.stopping = True

    def _ended(
        self, name: str, task: asyncio.Task[Any], cleanup: Cleanup | None, policy: Policy
    ) -> None:
        self._tasks.discard(task)
        if task in self._ending:
            self._ending.discard(task)
            if not task.cancelled():
                task.exception()  # retrieved: it was ending anyway
            return
        if task.cancelled() or task.exception() is None:
            if self.stopping or policy is Policy.LOG:
                return
        elif policy is Policy.LOG:
            error = task.exception()
            log.error(
                "a task died; going on without it",
                task=name,
                error=f"{type(error).__name__}: {error}",
                exc_info=error,
            )
            return
        error = _why(task)
        if cleanup is not None:
            cleanup(error)
        self.report(name, error)

    def report(self, name: str, error: BaseException) -> None:
        """A supervised piece of work failed in a way the process cannot go on from."""
        log.error(
            "a supervised task died",
            task=name,
            error=f"{type(error).__name__}: {error}",
            exc_info=None if isinstance(error, self.permanent) else error,
        )
        if self.fault is None:
            self.fault = Fault(name, error)
            if self._on_fault is not None:
                self._on_fault(self.fault)


async def _restarting(
    name: str,
    work: Callable[[], Awaitable[None]],
    restart: Restart,
    permanent: tuple[type[Exception], ...],
) -> None:
    while True:
        try:
            await work()
            continue
        except permanent:
            raise  # no retry can fix it: a fault
        except restart.expected as exc:
            log.warning(f"{name} failed; retrying", error=str(exc), retry_in=restart.delay)
        except Exception:
            # A bug or a malformed answer must not end the retries.
            log.exception(f"{name} crashed; retrying", retry_in=restart.delay)
        await asyncio.sleep(restart.delay)


def _why(task: asyncio.Task[Any]) -> BaseException:
    if task.cancelled():
        return TaskDied("it was cancelled")
    error = task.exception()
    return error if error is not None else TaskDied("it returned, and must run until stopped")
