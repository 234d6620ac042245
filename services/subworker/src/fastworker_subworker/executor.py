"""Turning one assignment into an ``Outcome``: look the task up, call it, convert what it
returned or raised. No scheduling here (that is ``runner``), no I/O.

Only names in the registry run; an unknown name is a failure, never an import.

Whether a failure may be retried is decided here, where the exception object still
exists: ``isinstance`` against the task's ``retry_on`` classes, so subclasses match (the
control plane only ever sees the exception's class name).
"""

from __future__ import annotations

import time
import traceback
from typing import Any

from fastworker import Task, TaskRegistry
from fastworker.retrying import Retry, retry_error
from fastworker_common.context import enter, leave
from fastworker_protocol import (
    VALUE_TYPES,
    Assignment,
    FailureReason,
    Outcome,
    TaskError,
    ValueTypeError,
    portable_form,
)
from fastworker_subworker.instrument import TaskInstrument


class Executor:
    def __init__(self, registry: TaskRegistry, instrument: TaskInstrument | None = None) -> None:
        self._registry = registry
        self._instrument = instrument or TaskInstrument("")

    @property
    def instrument(self) -> TaskInstrument:
        return self._instrument

    def pool_of(self, assignment: Assignment) -> str:
        """``async``, ``thread`` or ``process`` (an unknown name fails on a thread)."""
        task = self._registry.get(assignment.name)
        if task is None:
            return "thread"
        return "async" if task.is_async else task.pool

    async def run_async(self, assignment: Assignment) -> Outcome:
        """Await an async task (cancellation propagates into it)."""
        started = time.time()
        task = self._registry.get(assignment.name)
        scope = self._instrument.begin(assignment)
        outcome, error = None, None
        try:
            if scope.hooks is not None:  # async signal handlers (``fastworker.signals``)
                await scope.hooks.started_async()
            if task is None:
                raise _unknown(assignment)
            args, kwargs = arguments_of(assignment)
            token = enter(assignment)
            try:
                value = await task.fn(*args, **kwargs)
            finally:
                leave(token)
        except Exception as exc:
            outcome, error = failure(assignment, started, exc, _retryable(task, exc)), exc
        else:
            outcome = _success(assignment, started, value)
        finally:
            if scope.hooks is not None:
                await self._instrument.end_async(scope, outcome, error)
            else:
                self._instrument.end(scope, outcome, error)
        return outcome

    def run_sync(self, assignment: Assignment) -> Outcome:
        """Call a sync task; blocks, so callers run it on a worker thread."""
        started = time.time()
        task = self._registry.get(assignment.name)
        scope = self._instrument.begin(assignment)
        error = None
        try:
            if task is None:
                raise _unknown(assignment)
            args, kwargs = arguments_of(assignment)
            token = enter(assignment)
            try:
                value = task.fn(*args, **kwargs)
            finally:
                leave(token)
        except BaseException as exc:  # even SystemExit: on a worker thread it is just a failure
            outcome, error = failure(assignment, started, exc, _retryable(task, exc)), exc
        else:
            outcome = _success(assignment, started, value)
        self._instrument.end(scope, outcome, error)
        return outcome


def _unknown(assignment: Assignment) -> LookupError:
    return LookupError(f"this subworker has no task named {assignment.name!r}")


def arguments_of(assignment: Assignment) -> tuple[list[Any], dict[str, Any]]:
    """The task's arguments as the client gave them: extension values of registered types
    (a UUID, a Decimal, the application's own) made back into their types here, just
    before the call, never earlier (PROTOCOL.md §3, "Portable values")."""
    return VALUE_TYPES.from_wire(assignment.args), VALUE_TYPES.from_wire(assignment.kwargs)


def _retryable(task: Task[..., Any] | None, exc: BaseException) -> bool | None:
    """Whether ``retry_on`` allows a retry of ``exc`` (``None``: no such task here, so the
    control plane decides from the names it was registered with). Arguments that do not
    decode never will."""
    if task is None:
        return None
    if isinstance(exc, ValueTypeError):
        return False
    return not task.retry_on or isinstance(exc, task.retry_on)


def _success(assignment: Assignment, started: float, value: Any) -> Outcome:
    """The result as it is, if it is a portable value (PROTOCOL.md §3): one that comes back
    to the client as itself and that the control plane, its journal and its dashboard can
    all encode again, a UUID, a Decimal or a registered type as its msgpack extension
    value. Anything else (a set, an unregistered dataclass...) is never coerced."""
    value, problem = portable_form(value, "result")
    if problem is not None:
        unportable = TypeError(f"result of type {_type_name(value)} cannot be sent: {problem}")
        return failure(assignment, started, unportable, False, FailureReason.UNSERIALIZABLE_RESULT)
    if type(value) is bytearray or type(value) is memoryview:
        value = bytes(value)  # a buffer the task may still change: send what it returned
    return Outcome(
        task_id=assignment.id, ok=True, result=value, started_at=started, finished_at=time.time()
    )


def _type_name(value: Any) -> str:
    kind = type(value)
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )


def failure(
    assignment: Assignment,
    started: float,
    exc: BaseException,
    retryable: bool | None,
    reason: FailureReason = FailureReason.EXCEPTION,
) -> Outcome:
    """A failed attempt's outcome; a task that raised ``Retry`` asks to be tried again
    (whatever its ``retry_on``), after the delay it gave."""
    if isinstance(exc, Retry):
        return Outcome(
            task_id=assignment.id,
            ok=False,
            error=retry_error(exc),
            started_at=started,
            finished_at=time.time(),
            retryable=True,
            retry_in=exc.countdown,
        )
    error = TaskError(
        type=type(exc).__name__,
        message=str(exc),
        traceback="".join(traceback.format_exception(exc)),
        reason=reason,
    )
    return Outcome(
        task_id=assignment.id,
        ok=False,
        error=error,
        started_at=started,
        finished_at=time.time(),
        retryable=retryable,
    )
