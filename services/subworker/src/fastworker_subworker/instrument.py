"""What surrounds each task run: its log fields and, when tracing, its ``process`` span.

While a task runs, ``task_id``, ``task_name``, ``worker_id`` and ``trace_id`` are bound
in structlog's context variables, so every log line the task writes (through structlog
or the standard ``logging`` module) carries them. With a tracer, the run is a
``process {task}`` CONSUMER span, child of the control plane's ``dispatch`` span, and the
current span while the task runs (spans the task makes nest under it).

It also calls the handlers of ``fastworker.signals`` (through ``fastworker.signal_hooks``):
the sync ones from ``begin`` and ``end``, in the thread that runs the task; an async task's
executor awaits the async ones through ``Scope.hooks`` (``None`` with no handler connected).

Never raises into the task run: instrumentation failing must not fail a task.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import Token
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog
from opentelemetry import context, propagate, trace
from opentelemetry.trace import Span, SpanKind, Tracer

from fastworker.signal_hooks import TaskHooks, task_hooks
from fastworker.tracing import mark_failed, messaging_attributes, trace_id_of
from fastworker_protocol import Assignment, Outcome


@dataclass(slots=True)
class Scope:
    log_tokens: Mapping[str, Token[Any]]
    span: Span | None = None
    context_token: Token[context.Context] | None = None
    hooks: TaskHooks | None = None  # the signal handlers of this run, if any


class TaskInstrument:
    """``adopt_context``: make no span, but run the task in the one its headers carry (in
    a process pool's child, whose ``process`` span the subworker made: ``open``)."""

    def __init__(
        self, worker_id: str, tracer: Tracer | None = None, *, adopt_context: bool = False
    ) -> None:
        self.worker_id = worker_id
        self.tracer = tracer
        self.adopt_context = adopt_context

    def begin(self, assignment: Assignment) -> Scope:
        span, token = None, None
        trace_id = trace_id_of(assignment.headers)
        if self.tracer is not None:
            span = self._start(assignment)
            token = context.attach(trace.set_span_in_context(span))
            trace_id = trace.format_trace_id(span.get_span_context().trace_id)
        elif self.adopt_context and assignment.headers:
            token = context.attach(propagate.extract(assignment.headers))
        log_tokens = structlog.contextvars.bind_contextvars(
            task_id=assignment.id,
            task_name=assignment.name,
            worker_id=self.worker_id,
            trace_id=trace_id,
        )
        hooks = task_hooks(assignment, self.worker_id)
        if hooks is not None:
            hooks.started()
        return Scope(log_tokens, span, token, hooks)

    def _start(self, assignment: Assignment) -> Span:
        assert self.tracer is not None
        return self.tracer.start_span(
            f"process {assignment.name}",
            context=propagate.extract(assignment.headers),
            kind=SpanKind.CONSUMER,
            attributes={
                **messaging_attributes(
                    "process", "process", assignment.name, assignment.id, assignment.priority or ""
                ),
                "fastworker.attempt": assignment.attempt,
                "fastworker.worker_id": self.worker_id,
            },
        )

    def open(self, assignment: Assignment) -> tuple[Assignment, Span | None]:
        """For a task run elsewhere (a child process): its ``process`` span, started now
        and not made current, and the assignment carrying that span's context."""
        if self.tracer is None:
            return assignment, None
        span = self._start(assignment)
        headers = dict(assignment.headers)
        propagate.inject(headers, context=trace.set_span_in_context(span))
        return msgspec.structs.replace(assignment, headers=headers), span

    def close(self, span: Span | None, outcome: Outcome | None, pid: int | None = None) -> None:
        """End a span from ``open`` with the task's outcome (``None``: cancelled)."""
        if span is None:
            return
        if pid is not None:
            span.set_attribute("process.pid", pid)
        self.end(Scope({}, span), outcome)

    async def end_async(
        self, scope: Scope, outcome: Outcome | None, exc: BaseException | None = None
    ) -> None:
        """``end`` for an async task with signal handlers: awaits the async ones first."""
        try:
            if scope.hooks is not None:
                await scope.hooks.finished_async(outcome, exc)
        finally:
            self.end(scope, outcome, exc)

    def end(self, scope: Scope, outcome: Outcome | None, exc: BaseException | None = None) -> None:
        """Close the scope; ``outcome`` is ``None`` when the run was cancelled."""
        if scope.hooks is not None and not scope.hooks.done:
            scope.hooks.finished(outcome, exc)
        if scope.span is not None:
            if exc is not None:
                scope.span.record_exception(exc)
            if outcome is None:
                mark_failed(scope.span, "cancelled")
            elif not outcome.ok and outcome.error is not None:
                mark_failed(scope.span, outcome.error.type, outcome.error.message)
            scope.span.end()
        if scope.context_token is not None:
            context.detach(scope.context_token)
        if scope.log_tokens:
            structlog.contextvars.reset_contextvars(**scope.log_tokens)
