"""What the clients' workflow calls send and how their replies are read, with no I/O.

Both clients (async and blocking) submit, read, wait for and cancel workflows the same
way; only the moving of bytes differs, so the messages and the rules live here, once.
A workflow goes on the normal submission channel through the client's ordinary request
loop, so leader failover and retries apply to it as to any task: its id is filled in
here, before the first send, so a re-sent ``SubmitWorkflow`` is the same workflow (the
control plane accepts each workflow id once).

Never import the subworker or the control plane from here.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar, cast

import msgspec

from fastworker._calls import pause_before_asking_again
from fastworker._canvas_compile import Shape
from fastworker.errors import Timeout
from fastworker.handles import AsyncWorkflowHandle, WorkflowHandle
from fastworker.tracing import MESSAGING_SYSTEM, active_tracer, mark_failed
from fastworker_protocol import Message, Priority, TaskSpec
from fastworker_protocol.workflows import (
    CancelWorkflow,
    GetWorkflow,
    OnFailure,
    SubmitWorkflow,
    WorkflowAccepted,
    WorkflowCancelled,
    WorkflowInfo,
    WorkflowState,
)

if TYPE_CHECKING:
    from fastworker.canvas import Canvas, Signature
    from fastworker.client import Client
    from fastworker.sync_client import SyncClient

M = TypeVar("M", bound=Message)
WORKFLOW_LANE = Priority.NORMAL  # the submission channel a workflow is sent on
RESULTS = None  # the results channel's lane


def workflow_message(
    item: Canvas,
    workflow_id: str | None,
    on_failure: OnFailure | str,
    link: Signature | Sequence[Signature] | None,
    link_error: Signature | Sequence[Signature] | None,
) -> tuple[SubmitWorkflow, Shape | None]:
    """``item`` compiled, with a workflow id (a fresh one if none is given), and where the
    value it leaves comes from."""
    return item.compile_with_shape(
        workflow_id=workflow_id or uuid.uuid4().hex,
        on_failure=on_failure,
        link=() if link is None else link,
        link_error=() if link_error is None else link_error,
    )


@contextmanager
def traced(message: SubmitWorkflow) -> Iterator[SubmitWorkflow]:
    """``message`` under one ``workflow`` PRODUCER span, whose context is in every step's
    task headers and every ``link``/``link_error`` task's (the message itself when not
    tracing): a workflow is one trace, each step's ``dispatch`` and ``process`` spans its
    descendants, where ``apply_async`` would give each task a trace of its own."""
    tracer = active_tracer()
    if tracer is None:
        yield message
        return
    from opentelemetry import propagate, trace
    from opentelemetry.trace import SpanKind

    span = tracer.start_span(
        "workflow",
        kind=SpanKind.PRODUCER,
        attributes=workflow_attributes(message),
    )
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    try:
        yield with_headers(message, carrier)
    except BaseException as exc:
        span.record_exception(exc)
        mark_failed(span, type(exc).__qualname__, str(exc))
        raise
    finally:
        span.end()


def workflow_attributes(message: SubmitWorkflow) -> dict[str, str | int]:
    return {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.destination.name": WORKFLOW_LANE.value,
        "fastworker.workflow.id": message.workflow_id,
        "fastworker.workflow.steps": len(message.steps),
    }


def with_headers(message: SubmitWorkflow, carrier: dict[str, str]) -> SubmitWorkflow:
    """``message`` with ``carrier`` (the trace context) in every task's headers."""

    def stamped(spec: TaskSpec) -> TaskSpec:
        return msgspec.structs.replace(spec, headers={**spec.headers, **carrier})

    return msgspec.structs.replace(
        message,
        steps=[msgspec.structs.replace(step, task=stamped(step.task)) for step in message.steps],
        link=[stamped(spec) for spec in message.link],
        link_error=[stamped(spec) for spec in message.link_error],
    )


def pause_before_waiting_again(
    info: WorkflowInfo, deadline: float | None, asked: float, now: float
) -> float | None:
    """``pause_before_asking_again`` for a ``GetWorkflow``: the workflow still runs."""
    running = info.state is WorkflowState.RUNNING
    return pause_before_asking_again(running, deadline, asked, now)


def final_workflow(info: WorkflowInfo, wait: float) -> WorkflowInfo:
    """A waited-for workflow, which must have ended."""
    if info.state is WorkflowState.RUNNING:
        raise Timeout(f"workflow {info.workflow_id} is still running after {wait:g} s")
    return info


class AsyncWorkflows:
    """The async client's workflow calls (mixed into :class:`~fastworker.client.Client`)."""

    timeout: float

    async def _request(
        self, lane: Priority | None, message: Message, reply_type: type[M], wait: float | None
    ) -> M:
        raise NotImplementedError

    async def submit_workflow(
        self,
        item: Canvas,
        *,
        workflow_id: str | None = None,
        on_failure: OnFailure | str = OnFailure.CANCEL,
        link: Signature | Sequence[Signature] | None = None,
        link_error: Signature | Sequence[Signature] | None = None,
    ) -> AsyncWorkflowHandle:
        """Submit a signature, chain, group, chord or ``Workflow`` as one workflow and
        return its handle (its id) at once: ``await handle`` is the value it leaves. The
        control plane accepts all of it or nothing (a cycle, an unknown task or bad
        arguments are refused before any step is queued); the same ``workflow_id``
        submitted again is the same workflow.

        ``on_failure``: ``"cancel"`` (a step that failed for good cancels every step not
        started) or ``"continue"`` (only its descendants; independent branches finish).
        ``link`` tasks are queued once the workflow succeeds (fed the list of its last
        steps' results), ``link_error`` tasks once it fails (fed the workflow id)."""
        message, shape = workflow_message(item, workflow_id, on_failure, link, link_error)
        with traced(message) as sent:
            reply = await self._request(WORKFLOW_LANE, sent, WorkflowAccepted, None)
        return AsyncWorkflowHandle(reply.workflow_id, cast("Client", self), shape)

    def workflow_handle(self, workflow_id: str) -> AsyncWorkflowHandle:
        """A handle of a workflow submitted before (by any client): its ``get()`` is the
        result of its last step, or the list of its last steps' results when it has
        several (the shape of a nested group is known only to the handle that submitted
        it)."""
        return AsyncWorkflowHandle(workflow_id, cast("Client", self))

    async def get_workflow(self, workflow_id: str) -> WorkflowInfo:
        """The workflow's state now, and each step's (``waiting``, ``skipped``, or its
        task's state); raises ``TaskNotFound`` if it is unknown or expired."""
        message = GetWorkflow(workflow_id=workflow_id)
        return await self._request(RESULTS, message, WorkflowInfo, None)

    async def wait_workflow(self, workflow_id: str, timeout: float | None = None) -> WorkflowInfo:
        """Wait until the workflow has ended (``success``, ``failure`` or ``cancelled``)
        and return its state; raises ``Timeout`` if it still runs after ``timeout``."""
        wait = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            asked = loop.time()
            left = max(0.0, deadline - asked)
            message = GetWorkflow(workflow_id=workflow_id, wait=left)
            info = await self._request(RESULTS, message, WorkflowInfo, left)
            pause = pause_before_waiting_again(info, deadline, asked, loop.time())
            if pause is None:
                return final_workflow(info, wait)
            await asyncio.sleep(pause)

    async def cancel_workflow(self, workflow_id: str) -> bool:
        """Cancel the workflow's steps not finished; ``False`` if it had already ended."""
        message = CancelWorkflow(workflow_id=workflow_id)
        return (await self._request(RESULTS, message, WorkflowCancelled, None)).cancelled


class SyncWorkflows:
    """The blocking client's workflow calls (mixed into ``SyncClient``), as the async
    client's."""

    timeout: float

    def _request(
        self,
        lane: Priority | None,
        message: Message,
        reply_type: type[M],
        wait: float | None = None,
    ) -> M:
        raise NotImplementedError

    def submit_workflow(
        self,
        item: Canvas,
        *,
        workflow_id: str | None = None,
        on_failure: OnFailure | str = OnFailure.CANCEL,
        link: Signature | Sequence[Signature] | None = None,
        link_error: Signature | Sequence[Signature] | None = None,
    ) -> WorkflowHandle:
        """As :meth:`Client.submit_workflow`: submit a workflow, return its handle."""
        message, shape = workflow_message(item, workflow_id, on_failure, link, link_error)
        with traced(message) as sent:
            reply = self._request(WORKFLOW_LANE, sent, WorkflowAccepted)
        return WorkflowHandle(reply.workflow_id, cast("SyncClient", self), shape)

    def workflow_handle(self, workflow_id: str) -> WorkflowHandle:
        """As :meth:`Client.workflow_handle`."""
        return WorkflowHandle(workflow_id, cast("SyncClient", self))

    def get_workflow(self, workflow_id: str) -> WorkflowInfo:
        """As :meth:`Client.get_workflow`."""
        return self._request(RESULTS, GetWorkflow(workflow_id=workflow_id), WorkflowInfo)

    def wait_workflow(self, workflow_id: str, timeout: float | None = None) -> WorkflowInfo:
        """As :meth:`Client.wait_workflow`."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while True:
            asked = time.monotonic()
            left = max(0.0, deadline - asked)
            message = GetWorkflow(workflow_id=workflow_id, wait=left)
            info = self._request(RESULTS, message, WorkflowInfo, left)
            pause = pause_before_waiting_again(info, deadline, asked, time.monotonic())
            if pause is None:
                return final_workflow(info, wait)
            time.sleep(pause)

    def cancel_workflow(self, workflow_id: str) -> bool:
        """As :meth:`Client.cancel_workflow`."""
        message = CancelWorkflow(workflow_id=workflow_id)
        return self._request(RESULTS, message, WorkflowCancelled).cancelled
