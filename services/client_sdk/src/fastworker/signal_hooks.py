"""Calling the handlers of ``fastworker.signals``: the runner's side, shared by the
subworker (its ``TaskInstrument``), a process pool's child and ``eager()``. Applications
connect handlers through ``fastworker.signals`` and never need this module.

A runner asks ``task_hooks`` once per attempt: ``None`` (no handler connected, the usual
case) costs it one attribute check and nothing more. Otherwise the ``TaskHooks`` it gets
calls the handlers at the attempt's start and end.

Never raises a handler's exception into the run: it is logged (with the task's log fields,
which are bound while handlers run) and the next handler is called.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from fastworker import signals
from fastworker.signals import Signal, TaskFailure, TaskFinished, TaskRun, WorkerProcess
from fastworker_common.context import enter, leave
from fastworker_protocol import Assignment, Outcome, TaskError, TaskState

log = logging.getLogger("fastworker.signals")  # the SDK logs with the standard library

RETRY_REASON = "retry"  # the ``TaskError.reason`` of an attempt that raised ``Retry``


def task_hooks(assignment: Assignment, worker_id: str) -> TaskHooks | None:
    """The hooks of one attempt, or ``None`` when no task signal has a handler."""
    if not signals.armed:
        return None
    return TaskHooks(assignment, worker_id)


class TaskHooks:
    """One attempt's handlers: ``started`` (sync ones) and, for an async task, then
    ``started_async`` as it begins; ``finished`` (a sync task) or ``finished_async`` (an
    async one) as it ends (``ended`` / ``ended_async`` with events made by ``events``)."""

    def __init__(self, assignment: Assignment, worker_id: str) -> None:
        self._assignment = assignment
        self.run = TaskRun(
            id=assignment.id,
            name=assignment.name,
            args=tuple(assignment.args),
            kwargs=dict(assignment.kwargs),
            attempt=assignment.attempt,
            queue=assignment.queue,
            priority=assignment.priority,
            eta=assignment.eta,
            headers=dict(assignment.headers),
            worker_id=worker_id,
        )
        self._began = time.monotonic()
        self.done = False  # the end's handlers have been called

    def started(self) -> None:
        self._call(signals.task_prerun, self.run)

    async def started_async(self) -> None:
        await self._await(signals.task_prerun, self.run)

    def finished(self, outcome: Outcome | None, exc: BaseException | None = None) -> None:
        """A sync task's end (``outcome`` ``None``: the attempt was cancelled)."""
        self.ended(*self._events(outcome, exc))

    async def finished_async(self, outcome: Outcome | None, exc: BaseException | None) -> None:
        """An async task's end, on its loop."""
        await self.ended_async(*self._events(outcome, exc))

    def ended(self, failure: TaskFailure | None, end: TaskFinished) -> None:
        self.done = True
        _warn_once_if_async_handlers(self.run.name)
        if failure is not None:
            self._call(_failure_signal(failure), failure)
        self._call(signals.task_postrun, end)

    async def ended_async(self, failure: TaskFailure | None, end: TaskFinished) -> None:
        self.done = True
        if failure is not None:
            self._call(_failure_signal(failure), failure)
            await self._await(_failure_signal(failure), failure)
        self._call(signals.task_postrun, end)
        await self._await(signals.task_postrun, end)

    def events(
        self,
        result: Any,
        error: TaskError | None,
        exc: BaseException | None,
        retryable: bool | None,
        will_retry: bool | None = None,
    ) -> tuple[TaskFailure | None, TaskFinished]:
        """The events of an attempt's end: a failure (if ``error``) and the postrun's."""
        state = TaskState.SUCCESS if error is None else TaskState.FAILURE
        if error is not None and error.reason == RETRY_REASON:
            state = TaskState.RETRYING
        failure = None
        if error is not None:
            failure = TaskFailure(self.run, error, exc, retryable, will_retry)
        duration = time.monotonic() - self._began
        return failure, TaskFinished(self.run, state, result, error, exc, duration)

    def _events(
        self, outcome: Outcome | None, exc: BaseException | None
    ) -> tuple[TaskFailure | None, TaskFinished]:
        if outcome is None:
            duration = time.monotonic() - self._began
            return None, TaskFinished(self.run, TaskState.CANCELLED, None, None, None, duration)
        if outcome.ok:
            return self.events(outcome.result, None, None, None)
        return self.events(None, outcome.error, exc, outcome.retryable)

    def _call(self, signal: Signal[Any], event: object) -> None:
        if signal.sync:
            token = enter(self._assignment)
            try:
                call_each(signal, signal.sync, event)
            finally:
                leave(token)

    async def _await(self, signal: Signal[Any], event: object) -> None:
        if not signal.awaited:
            return
        token = enter(self._assignment)
        try:
            await await_each(signal, signal.awaited, event)
        finally:
            leave(token)


def call_each(signal: Signal[Any], handlers: Iterable[Callable[[Any], Any]], event: object) -> None:
    for handler in handlers:
        try:
            handler(event)
        except Exception:
            _failed(signal, handler)


async def await_each(
    signal: Signal[Any], handlers: Iterable[Callable[[Any], Any]], event: object
) -> None:
    for handler in handlers:
        try:
            await handler(event)
        except Exception:
            _failed(signal, handler)


def _failure_signal(failure: TaskFailure) -> Signal[TaskFailure]:
    """``task_retry`` for an attempt that asked for a retry, ``task_failure`` otherwise."""
    return signals.task_retry if failure.error.reason == RETRY_REASON else signals.task_failure


_warned = False


def _warn_once_if_async_handlers(task_name: str) -> None:
    """Say once per process that async handlers skip sync tasks (see ``signals``)."""
    global _warned
    if _warned:
        return
    skipped = [h for s in signals.SIGNALS if s.per_task for h in s.awaited]
    if skipped:
        _warned = True
        log.warning(
            "async signal handlers are awaited around async tasks only; sync task %s "
            "calls the sync handlers alone, not %s (connect a plain def to cover it)",
            task_name,
            ", ".join(getattr(h, "__qualname__", repr(h)) for h in skipped),
        )


def _failed(signal: Signal[Any], handler: Callable[..., Any]) -> None:
    name = f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', handler)}"
    log.exception("signal handler %s of %s raised; the task carries on", name, signal.name)


# --- worker signals ----------------------------------------------------------------------


def worker_event(worker_id: str, *, child: bool) -> WorkerProcess:
    return WorkerProcess(worker_id=worker_id, pid=os.getpid(), child=child)


async def worker_signal(signal: Signal[WorkerProcess], event: WorkerProcess) -> None:
    """On the worker's loop: sync handlers, then async ones awaited."""
    call_each(signal, signal.sync, event)
    await await_each(signal, signal.awaited, event)


def worker_signal_blocking(signal: Signal[WorkerProcess], event: WorkerProcess) -> None:
    """Where no loop runs (a process pool's child): async handlers each get one."""
    call_each(signal, signal.sync, event)
    if signal.awaited:
        asyncio.run(await_each(signal, signal.awaited, event))
