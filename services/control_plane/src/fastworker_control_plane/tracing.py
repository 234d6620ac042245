"""The control plane's part of a task's trace: one ``dispatch {task}`` span per attempt.

The span is a child of the context the submitter put in the task's headers (a root span
if it put none), runs from the moment the attempt joined its queue to its assignment, and
its own context replaces ``traceparent`` in the assignment, so the subworker's
``process`` span hangs under it. Only built when this process exports traces.
"""

from __future__ import annotations

import msgspec
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Tracer

from fastworker.tracing import messaging_attributes
from fastworker_control_plane.core.board_view import BoardView
from fastworker_protocol import Assignment

_NS = 1_000_000_000


class DispatchTracer:
    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def dispatched(
        self, view: BoardView, worker_id: str, tasks: list[Assignment], now: float
    ) -> list[Assignment]:
        """The assignments, each carrying its new ``dispatch`` span's context."""
        traced = []
        for assignment in tasks:
            record = view.task(assignment.id, now)
            queued_at = record.queued_at if record is not None else now
            priority = str(assignment.priority or "")
            span = self.tracer.start_span(
                f"dispatch {assignment.name}",
                context=propagate.extract(assignment.headers),
                kind=SpanKind.PRODUCER,
                attributes={
                    **messaging_attributes(
                        "dispatch", "send", assignment.name, assignment.id, priority
                    ),
                    "fastworker.attempt": assignment.attempt,
                    "fastworker.worker_id": worker_id,
                },
                start_time=int(queued_at * _NS),
            )
            headers = dict(assignment.headers)
            propagate.inject(headers, context=trace.set_span_in_context(span))
            span.end(end_time=int(now * _NS))
            traced.append(msgspec.structs.replace(assignment, headers=headers))
        return traced
