"""``eager()``: every task submitted in this process runs at once, inline, in the caller.

While an :class:`Eager` is active, ``Client``, ``SyncClient``, ``FastWorker(app)`` and
``add.delay()`` send their requests to it instead of a control plane (``fastworker_common.local``).
A submission goes through what production does to it, minus the network and the clock:

* the request is encoded and decoded with the protocol's codec, so arguments arrive as
  msgpack gives them back (a tuple is a list), and a message too large is refused; a
  value of a type that is neither portable nor registered (``fastworker.register_type``)
  is refused at submit, and a registered one (a UUID, a Decimal) goes through its
  extension encoding both ways, arguments and result;
* the task name must be registered in this process (or be the dotted suffix of exactly one
  registered name: ``add`` for ``app.tasks.add``), and the arguments must fit its
  signature (``UnknownTask`` / ``InvalidArguments``, as from a control plane);
* it runs with ``current_task()`` set and the handlers of ``fastworker.signals`` around each
  attempt (``TaskFailure.will_retry`` is known here); a failure is retried up to its ``max_retries``
  (``retry_on`` honoured), with no backoff; a result that is not portable fails it; its
  states, attempts and errors follow the board's rules (``_life``);
* an ``async def`` task with a time limit is cancelled at the limit; a plain one cannot be
  stopped (a subworker abandons it to its thread), so it runs to its end and then fails
  with reason ``timeout`` if it took longer.

Workflows (``submit_workflow``, a canvas's ``delay``) are refused with a clear error: they
need the control plane's workflow engine, which ``Cluster`` (``fastworker_cluster``) runs.
Countdowns and ETAs are not waited for: the task runs now (``Cluster`` keeps time).
An exception from a task propagates out of ``delay()`` by default, as the task's own;
``propagate=False`` keeps the failure as a result (``wait`` raises ``TaskFailed``).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import msgspec

from fastworker._task import Task, TaskRegistry, default_registry
from fastworker.retrying import Retry, retry_error
from fastworker.signal_hooks import TaskHooks, task_hooks
from fastworker_common import local
from fastworker_common.context import enter, leave
from fastworker_protocol import (
    VALUE_TYPES,
    Accepted,
    Assignment,
    Cancel,
    Cancelled,
    Codec,
    DecodeError,
    Error,
    ErrorCode,
    FailureReason,
    Get,
    ListQueues,
    ListSchedules,
    ListTasks,
    ListWorkers,
    Message,
    Priority,
    QueueList,
    Rejection,
    Results,
    ScheduleList,
    Submit,
    TaskError,
    TaskList,
    TaskResult,
    TaskSpec,
    TaskState,
    ValueTypeError,
    WorkerList,
    portable_form,
)
from fastworker_protocol.attempts import Life
from fastworker_protocol.task_names import AmbiguousTaskName
from fastworker_protocol.workflows import CancelWorkflow, GetWorkflow, SubmitWorkflow

WORKER_ID = "eager"
NO_WORKFLOWS = (
    "workflows are not supported under eager(); use the fastworker_cluster fixture "
    "(a real control plane and subworker in this process)"
)


@dataclass(frozen=True)
class Submission:
    """One task submitted under ``eager()``, as it arrived, and how it ended (its
    arguments and result as the task and the client see them: a registered type as
    itself, not its extension value)."""

    task_id: str
    name: str
    args: list[Any]
    kwargs: dict[str, Any]
    priority: Priority
    queue: str | None
    eta: float | None
    result: TaskResult

    @property
    def succeeded(self) -> bool:
        return self.result.status == TaskState.SUCCESS


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class _Attempt:
    """What running one attempt gave: a value, or an error (and the exception)."""

    value: Any = None
    error: TaskError | None = None
    exc: BaseException | None = None
    retryable: bool = False


@dataclass
class Eager:
    """Runs submitted tasks inline (see the module). Use it as a context manager, or
    ``start()`` / ``stop()`` it (a test settings module, a fixture)."""

    registry: TaskRegistry = field(default_factory=lambda: default_registry)
    propagate: bool = True
    submissions: list[Submission] = field(default_factory=list)
    name: str = "eager mode (fastworker.testing.eager)"

    def __post_init__(self) -> None:
        self._codec = Codec()  # as a control plane: extension values stay opaque
        self._reader = Codec(decode_values=True)  # as a client reads a result
        self._results: dict[str, TaskResult] = {}
        self._keys: dict[tuple[str, str], str] = {}  # (name, idempotency key) -> task id
        self._lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Clients started from now on run their tasks here (clients already started stay
        connected where they are)."""
        local.install(self)
        return self

    def stop(self) -> None:
        local.uninstall(self)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def clock(self) -> float:
        return time.time()

    # --- for assertions ----------------------------------------------------------------------

    def submitted(self, name: str | Task[..., Any]) -> list[Submission]:
        """The submissions of one task (by name or ``@task`` object), oldest first. A
        short name stands for the full name it resolves to, as at submit."""
        if isinstance(name, str):
            known = self.registry.resolve(name)
            wanted = name if known is None else known.name
        else:
            wanted = name.name
        return [s for s in self.submissions if s.name == wanted]

    def clear(self) -> None:
        with self._lock:
            self.submissions.clear()
            self._results.clear()
            self._keys.clear()

    # --- the backend --------------------------------------------------------------------------

    async def answer(self, lane: local.Lane, data: bytes) -> bytes:
        message = self._decode(data)
        if isinstance(message, Submit):
            return await self._submitted(message, lane, _await_here)
        return self._encode(self._reply(message))

    def answer_blocking(self, lane: local.Lane, data: bytes, timeout: float) -> bytes:
        message = self._decode(data)
        if isinstance(message, Submit):
            return _finish(self._submitted(message, lane, _run_to_end))
        return self._encode(self._reply(message))

    def _decode(self, data: bytes) -> Message:
        """The request, or the error a control plane answers to one it cannot read (a
        client sends what its arguments say: a negative ``max_retries`` does not decode)."""
        try:
            return self._codec.decode(data)
        except DecodeError as exc:
            return Error(code=exc.code, message=str(exc))

    def _encode(self, reply: Message) -> bytes:
        return self._codec.encode(reply)

    async def _submitted(self, message: Submit, lane: local.Lane, run_async: _AsyncRunner) -> bytes:
        priority = lane if lane is not None else Priority.NORMAL
        checked: list[tuple[int, TaskSpec, Task[..., Any]]] = []
        rejections: list[Rejection] = []
        for index, spec in enumerate(message.tasks):
            try:
                task = self._check(spec)  # under its full name, as a control plane takes it
                checked.append((index, msgspec.structs.replace(spec, name=task.name), task))
            except _Refused as refused:
                if message.atomic:
                    return self._encode(Error(code=refused.code, message=str(refused)))
                rejections.append(Rejection(index=index, code=refused.code, message=str(refused)))
        ids = [""] * len(message.tasks)  # as a control plane: "" for a task it refused
        raised: list[BaseException] = []
        for index, spec, task in checked:
            key = None if spec.idempotency_key is None else (spec.name, spec.idempotency_key)
            task_id = self._keys.get(key, "") if key else ""
            task_id = task_id or spec.id or uuid.uuid4().hex
            ids[index] = task_id
            if key is not None:
                self._keys[key] = task_id  # the same key is the same task, as in production
            if task_id not in self._results:  # a task id is accepted once, as in production
                exc = await self._run(task_id, spec, task, priority, run_async)
                if exc is not None:
                    raised.append(exc)
        if raised and self.propagate:
            raise raised[0]  # the task's own exception, out of delay()
        if message.wait is not None:
            return self._encode(Results(results=[self._results.get(i) for i in ids]))
        return self._encode(Accepted(task_ids=ids, rejected=rejections))

    def _check(self, spec: TaskSpec) -> Task[..., Any]:
        """The task ``spec`` names (a short name resolved as a control plane resolves
        it), its arguments checked."""
        try:
            task = self.registry.resolve(spec.name)
        except AmbiguousTaskName as exc:
            raise _Refused(ErrorCode.UNKNOWN_TASK, str(exc)) from None
        if task is None:
            raise _Refused(
                ErrorCode.UNKNOWN_TASK,
                f"no task named {spec.name!r} is registered in this process "
                "(import the module that defines it)",
            )
        try:
            inspect.signature(task.fn).bind(*spec.args, **spec.kwargs)
        except TypeError as exc:
            raise _Refused(ErrorCode.INVALID_ARGUMENTS, f"{spec.name}(): {exc}") from None
        return task

    async def _run(
        self,
        task_id: str,
        spec: TaskSpec,
        task: Task[..., Any],
        priority: Priority,
        run_async: _AsyncRunner,
    ) -> BaseException | None:
        """Run every attempt and keep the result; the last attempt's exception, if any."""
        max_retries = task.max_retries if spec.max_retries is None else spec.max_retries
        limit = spec.time_limit if spec.time_limit is not None else task.time_limit
        queue = spec.queue or task.queue
        life = Life(max_retries, delayed=spec.eta is not None)
        submitted = time.time()
        while True:
            assignment = Assignment(
                id=task_id,
                name=spec.name,
                args=spec.args,
                kwargs=spec.kwargs,
                headers=spec.headers,
                attempt=life.start(),
                time_limit=limit,
                priority=priority,
                queue=queue,
                eta=spec.eta,
            )
            started = time.time()
            hooks = task_hooks(assignment, WORKER_ID)
            if hooks is not None:
                await _prerun(hooks, task, run_async)
            attempt = await self._attempt(task, assignment, run_async)
            retrying = attempt.error is not None and life.failed(attempt.error, attempt.retryable)
            if attempt.error is None:
                life.succeeded()
            if hooks is not None:
                await _postrun(hooks, task, attempt, retrying, run_async)
            if not retrying:
                break
        error, attempt_errors = life.errors(attempt.error)
        result = TaskResult(
            task_id=task_id,
            name=spec.name,
            status=life.state,
            priority=priority,
            result=attempt.value,
            error=error,
            attempts=life.attempts,
            worker_id=WORKER_ID,
            submitted_at=submitted,
            started_at=started,
            finished_at=time.time(),
            eta=spec.eta,
            attempt_errors=attempt_errors,
            queue=queue,
        )
        # The result as a client reads it: through msgpack (kept as a control plane keeps
        # it, the registered types' extension values opaque, for the replies).
        sent = self._codec.encode(Results(results=[result]))
        kept = self._codec.decode_as(sent, Results).results[0]
        final = self._reader.decode_as(sent, Results).results[0]
        assert kept is not None
        assert final is not None
        args, kwargs = _as_given(spec.args), _as_given(spec.kwargs)
        with self._lock:
            self._results[task_id] = kept
            self.submissions.append(
                Submission(
                    task_id=task_id,
                    name=spec.name,
                    args=args,
                    kwargs=kwargs,
                    priority=priority,
                    queue=spec.queue,
                    eta=spec.eta,
                    result=final,
                )
            )
        return attempt.exc

    async def _attempt(
        self, task: Task[..., Any], assignment: Assignment, run_async: _AsyncRunner
    ) -> _Attempt:
        limit = assignment.time_limit
        token = enter(assignment)
        began = time.monotonic()
        try:
            # As a subworker: registered types made back from their extension values.
            args = VALUE_TYPES.from_wire(assignment.args)
            kwargs = VALUE_TYPES.from_wire(assignment.kwargs)
            if task.is_async:

                async def call() -> Any:
                    running = task.fn(*args, **kwargs)
                    return await asyncio.wait_for(running, limit)

                value = await run_async(call)
            else:
                value = task.fn(*args, **kwargs)
        except TimeoutError as exc:
            if task.is_async and limit is not None and time.monotonic() - began >= limit:
                return _timed_out(limit, exc)
            return _failed(task, exc, assignment)
        except Exception as exc:
            return _failed(task, exc, assignment)
        finally:
            leave(token)
        if limit is not None and time.monotonic() - began > limit:
            return _timed_out(limit, None)
        value, problem = portable_form(value, "result")
        if problem is not None:
            unportable = TypeError(
                f"result of type {type(value).__name__} cannot be sent: {problem}"
            )
            error = _error(unportable, FailureReason.UNSERIALIZABLE_RESULT)
            return _Attempt(error=error, exc=unportable)
        return _Attempt(value=value)

    def _reply(self, message: Message) -> Message:
        """Every request but ``submit``, answered from what ran."""
        if isinstance(message, Error):
            return message  # the request did not decode
        with self._lock:
            results = dict(self._results)
        if isinstance(message, Get):
            return Results(results=[results.get(i) for i in message.task_ids])
        if isinstance(message, Cancel):
            found = results.get(message.task_id)
            if found is None:
                return Error(code=ErrorCode.TASK_NOT_FOUND, message=f"no task {message.task_id}")
            return Cancelled(task_id=message.task_id, status=found.status, changed=False)
        if isinstance(message, ListTasks):
            listed = [r for r in reversed(results.values()) if message.status in (None, r.status)]
            return TaskList(tasks=listed[: message.limit], more=len(listed) > message.limit)
        if isinstance(message, ListWorkers):
            return WorkerList(workers=[])
        if isinstance(message, ListSchedules):
            return ScheduleList(schedules=[])
        if isinstance(message, ListQueues):
            return QueueList(queues=[])
        if isinstance(message, SubmitWorkflow | GetWorkflow | CancelWorkflow):
            return Error(code=ErrorCode.INVALID_MESSAGE, message=NO_WORKFLOWS)
        return Error(
            code=ErrorCode.INVALID_MESSAGE,
            message=f"{type(message).__name__} is not available in {self.name}",
        )


def _as_given(value: Any) -> Any:
    """Arguments as the task got them (for ``submissions``), or as they came if they do not
    decode (the attempt failed for it already)."""
    try:
        return VALUE_TYPES.from_wire(value)
    except ValueTypeError:
        return value


def eager(registry: TaskRegistry | None = None, *, propagate: bool = True) -> Eager:
    """Tasks submitted while it is active run inline (see the module): ``with eager() as
    e: ...``, then ``e.submissions``. ``registry`` defaults to every ``@task`` of the
    process."""
    return Eager(registry=registry or default_registry, propagate=propagate)


# --- running the coroutine of an async task --------------------------------------------

_AsyncRunner = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


async def _await_here(call: Callable[[], Awaitable[Any]]) -> Any:
    """On the async path the caller's event loop runs it."""
    return await call()


async def _run_to_end(call: Callable[[], Awaitable[Any]]) -> Any:
    """On the blocking path there may be no loop in this thread (``asyncio.run`` there),
    or one that is busy calling us (a loop of its own, on another thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_call(call))
    box: list[Any] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            box.append(asyncio.run(_call(call)))
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run, name="fastworker-eager")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return box[0]


async def _call(call: Callable[[], Awaitable[Any]]) -> Any:
    return await call()


# --- signals (``fastworker.signals``) ----------------------------------------------------


async def _prerun(hooks: TaskHooks, task: Task[..., Any], run_async: _AsyncRunner) -> None:
    """An async task's handlers run where its coroutine does (``run_async``)."""
    if not task.is_async:
        hooks.started()
        return

    async def started() -> None:
        hooks.started()
        await hooks.started_async()

    await run_async(started)


async def _postrun(
    hooks: TaskHooks,
    task: Task[..., Any],
    attempt: _Attempt,
    retrying: bool,
    run_async: _AsyncRunner,
) -> None:
    raised = attempt.exc  # as on a subworker: no exception for a result it cannot send
    if attempt.error is not None and attempt.error.reason == FailureReason.UNSERIALIZABLE_RESULT:
        raised = None
    failure, end = hooks.events(
        attempt.value, attempt.error, raised, attempt.retryable, will_retry=retrying
    )
    if not task.is_async:
        hooks.ended(failure, end)
        return

    async def ended() -> None:
        await hooks.ended_async(failure, end)

    await run_async(ended)


def _finish(coroutine: Awaitable[bytes]) -> bytes:
    """Run ``_submitted`` on the blocking path: it never suspends there (``_run_to_end``
    completes without awaiting anything pending), so one step finishes it."""
    step = coroutine.__await__()
    try:
        next(step)
    except StopIteration as done:
        reply: bytes = done.value
        return reply
    raise AssertionError("eager submission suspended on the blocking path")


# --- outcomes ------------------------------------------------------------------------------


def _error(exc: BaseException, reason: FailureReason = FailureReason.EXCEPTION) -> TaskError:
    return TaskError(
        type=type(exc).__name__,
        message=str(exc),
        traceback="".join(traceback.format_exception(exc)),
        reason=reason,
    )


def _failed(task: Task[..., Any], exc: BaseException, assignment: Assignment) -> _Attempt:
    if isinstance(exc, Retry):  # retried at once: eager mode keeps no clock
        return _Attempt(error=retry_error(exc), exc=exc.exc or exc, retryable=True)
    retryable = not task.retry_on or isinstance(exc, task.retry_on)
    return _Attempt(error=_error(exc), exc=exc, retryable=retryable)


def _timed_out(limit: float, exc: BaseException | None) -> _Attempt:
    error = TaskError(
        type="Timeout",
        reason=FailureReason.TIMEOUT,
        message=f"the task ran longer than its {limit:g} s timeout",
    )
    return _Attempt(error=error, exc=exc or TimeoutError(error.message))
