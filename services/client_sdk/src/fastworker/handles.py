"""Handles: what ``delay()``, ``apply_async()`` and ``submit_workflow()`` return.

A :class:`TaskHandle` is the task's id (a ``str`` subclass: it prints, compares, hashes,
stores and is accepted as an id everywhere one was, exactly as the id) that can also read
the task through the client that queued it::

    handle = add.delay(2, 3)
    handle.get(timeout=10)   # 5, or raises TaskFailed / TaskCancelled / Timeout
    handle.status()          # TaskStatus.SUCCESS, asked of the control plane now

Every question a handle answers is asked of the control plane when it is asked: nothing is
read from a local cache, so a handle never reports a state older than the server's.
:class:`AsyncTaskHandle` is the same for the async :class:`~fastworker.Client`, with
``async`` methods, and awaiting it is ``await handle.get()``.

A handle sent somewhere else (pickled, put in a task's arguments, stored in a database)
arrives as the plain id; ``client.handle(task_id)`` makes a handle of an id again.

A :class:`WorkflowHandle` is a workflow's id; its ``get()`` is the value the whole
workflow leaves (``fastworker.canvas``): a chain's last step's result, a group's list of
results in member order, a chord's callback's result.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from fastworker._calls import unwrap
from fastworker._canvas_compile import Shape
from fastworker.errors import TaskCancelled, TaskNotFound
from fastworker_protocol import TaskResult, TaskState
from fastworker_protocol.values import Id
from fastworker_protocol.workflows import StepState, WorkflowInfo, WorkflowState

if TYPE_CHECKING:
    from fastworker.client import Client
    from fastworker.sync_client import SyncClient

T = TypeVar("T")


class _Id(Id):
    """A ``str`` that is an id, sent in arguments and results as the plain id (``Id``).
    Pickled or copied, it is the plain id too: the client it was bound to belongs to this
    process only."""

    @property
    def id(self) -> str:
        """The plain id (``str(handle)`` is the same)."""
        return str.__str__(self)

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        return (str, (self.id,))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r})"


class TaskHandle(_Id, Generic[T]):
    """A queued task, read through the :class:`~fastworker.SyncClient` that queued it."""

    _client: SyncClient

    def __new__(cls, task_id: str, client: SyncClient) -> Self:
        handle = super().__new__(cls, task_id)
        handle._client = client
        return handle

    def get(self, timeout: float | None = None) -> T:
        """Wait up to ``timeout`` seconds (the client's timeout by default) for the task's
        value; raises ``TaskFailed``, ``TaskCancelled``, ``Timeout`` or ``TaskNotFound``."""
        value: T = self._client.wait(self.id, timeout)
        return value

    def result(self, timeout: float | None = None) -> TaskResult:
        """Wait for the task to end and return its whole ``TaskResult`` (any status)."""
        return self._client.wait_result(self.id, timeout)

    def info(self) -> TaskResult:
        """What the control plane knows of the task now (``TaskNotFound`` if nothing)."""
        return _known(self.id, self._client.get_task_result(self.id))

    def status(self) -> TaskState:
        """The task's status now, asked of the control plane."""
        return self.info().status

    def ready(self) -> bool:
        """Whether the task has ended for good (success, failure or cancelled)."""
        return self.status().is_final

    def cancel(self) -> bool:
        """Cancel the task if it has not finished; ``False`` if it already had."""
        return self._client.cancel_task(self.id)


class AsyncTaskHandle(_Id, Generic[T]):
    """A queued task, read through the async :class:`~fastworker.Client` that queued it.
    ``await handle`` is ``await handle.get()``."""

    _client: Client

    def __new__(cls, task_id: str, client: Client) -> Self:
        handle = super().__new__(cls, task_id)
        handle._client = client
        return handle

    async def get(self, timeout: float | None = None) -> T:
        """As :meth:`TaskHandle.get`."""
        value: T = await self._client.wait(self.id, timeout)
        return value

    def __await__(self) -> Generator[Any, None, T]:
        return self.get().__await__()

    async def result(self, timeout: float | None = None) -> TaskResult:
        """As :meth:`TaskHandle.result`."""
        return await self._client.wait_result(self.id, timeout)

    async def info(self) -> TaskResult:
        """As :meth:`TaskHandle.info`."""
        return _known(self.id, await self._client.get_task_result(self.id))

    async def status(self) -> TaskState:
        """As :meth:`TaskHandle.status`."""
        return (await self.info()).status

    async def ready(self) -> bool:
        """As :meth:`TaskHandle.ready`."""
        return (await self.status()).is_final

    async def cancel(self) -> bool:
        """As :meth:`TaskHandle.cancel`."""
        return await self._client.cancel_task(self.id)


class WorkflowHandle(_Id):
    """A submitted workflow, read through the :class:`~fastworker.SyncClient` that
    submitted it."""

    _client: SyncClient
    _shape: Shape | None

    def __new__(cls, workflow_id: str, client: SyncClient, shape: Shape | None = None) -> Self:
        handle = super().__new__(cls, workflow_id)
        handle._client = client
        handle._shape = shape
        return handle

    def get(self, timeout: float | None = None) -> Any:
        """Wait up to ``timeout`` seconds for the workflow to end and return the value it
        leaves; raises ``TaskFailed`` (of the step that failed) or ``TaskCancelled`` when
        it did not succeed, ``Timeout`` when it still runs."""
        info = self._client.wait_workflow(self.id, timeout)
        ids = outcome_ids(info, self._shape)
        results = self._client.wait_results(ids, timeout) if ids else []
        return workflow_value(info, self._shape, results)

    def info(self) -> WorkflowInfo:
        """The workflow's state and its steps', asked of the control plane now."""
        return self._client.get_workflow(self.id)

    def status(self) -> WorkflowState:
        return self.info().state

    def ready(self) -> bool:
        """Whether the workflow has ended (succeeded, failed or was cancelled)."""
        return self.status() is not WorkflowState.RUNNING

    def cancel(self) -> bool:
        """Cancel the steps not finished; ``False`` if it had already ended."""
        return self._client.cancel_workflow(self.id)


class AsyncWorkflowHandle(_Id):
    """As :class:`WorkflowHandle`, for the async :class:`~fastworker.Client`;
    ``await handle`` is ``await handle.get()``."""

    _client: Client
    _shape: Shape | None

    def __new__(cls, workflow_id: str, client: Client, shape: Shape | None = None) -> Self:
        handle = super().__new__(cls, workflow_id)
        handle._client = client
        handle._shape = shape
        return handle

    async def get(self, timeout: float | None = None) -> Any:
        """As :meth:`WorkflowHandle.get`."""
        info = await self._client.wait_workflow(self.id, timeout)
        ids = outcome_ids(info, self._shape)
        results = await self._client.wait_results(ids, timeout) if ids else []
        return workflow_value(info, self._shape, results)

    def __await__(self) -> Generator[Any, None, Any]:
        return self.get().__await__()

    async def info(self) -> WorkflowInfo:
        return await self._client.get_workflow(self.id)

    async def status(self) -> WorkflowState:
        return (await self.info()).state

    async def ready(self) -> bool:
        return (await self.status()) is not WorkflowState.RUNNING

    async def cancel(self) -> bool:
        return await self._client.cancel_workflow(self.id)


def _known(task_id: str, result: TaskResult | None) -> TaskResult:
    if result is None:
        raise TaskNotFound("task_not_found", f"task {task_id} is unknown or expired")
    return result


# --- a workflow's value: pure --------------------------------------------------------------


def last_steps(info: WorkflowInfo) -> Shape:
    """The value of a workflow whose handle was made from its id alone: the result of its
    last step when it has one, else the list of its last steps' results, in step order."""
    waited = {parent for step in info.steps for parent in step.after}
    last = [i for i in range(len(info.steps)) if i not in waited]
    return last[0] if len(last) == 1 else tuple(last)


def _indices(shape: Shape) -> list[int]:
    if isinstance(shape, int):
        return [shape]
    return [i for part in shape for i in _indices(part)]


def outcome_ids(info: WorkflowInfo, shape: Shape | None) -> list[str]:
    """The task ids whose results make the value of an ended workflow: those of the value's
    steps when it succeeded, else the step that decides how it failed (none if cancelled
    before any step failed)."""
    if info.state is WorkflowState.SUCCESS:
        return [
            info.steps[i].task_id for i in _indices(last_steps(info) if shape is None else shape)
        ]
    failed = _first_failed(info)
    return [] if failed is None else [info.steps[failed].task_id]


def _first_failed(info: WorkflowInfo) -> int | None:
    return next((i for i, s in enumerate(info.steps) if s.state is StepState.FAILURE), None)


def workflow_value(info: WorkflowInfo, shape: Shape | None, results: Sequence[TaskResult]) -> Any:
    """The value an ended workflow leaves, from the results of :func:`outcome_ids`; raises
    ``TaskFailed`` with the failed step's error, or ``TaskCancelled``."""
    if info.state is WorkflowState.SUCCESS:
        values = iter([unwrap(result) for result in results])
        return _fill(last_steps(info) if shape is None else shape, values)
    if results:
        [failed] = results
        unwrap(failed)  # raises TaskFailed (or TaskCancelled) with the step's own error
    raise TaskCancelled(info.workflow_id)  # cancelled before any step failed


def _fill(shape: Shape, values: Any) -> Any:
    if isinstance(shape, int):
        return next(values)
    return [_fill(part, values) for part in shape]
