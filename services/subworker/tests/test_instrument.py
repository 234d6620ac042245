"""What surrounds a task run: its structlog context fields while it runs, and with a tracer
its ``process`` span, child of the context in the assignment's ``traceparent``. Spans go
to an in-memory exporter through a local tracer provider (never the global one)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from structlog.contextvars import bind_contextvars, clear_contextvars, get_contextvars
from structlog.testing import LogCapture

from fastworker_protocol import Assignment, Outcome, Priority, TaskError
from fastworker_subworker.instrument import TaskInstrument

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"
FIELDS = ("task_id", "task_name", "worker_id", "trace_id")


@pytest.fixture(autouse=True)
def clean_log_context() -> Iterator[None]:
    clear_contextvars()
    yield
    clear_contextvars()


@pytest.fixture
def exported() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exported: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    yield provider
    provider.shutdown()


@pytest.fixture
def traced(provider: TracerProvider) -> TaskInstrument:
    return TaskInstrument("sw-1", provider.get_tracer("t"))


def assignment(
    task_id: str = "t1",
    *,
    traceparent: str | None = TRACEPARENT,
    priority: Priority | None = Priority.HIGH,
    attempt: int = 2,
) -> Assignment:
    headers = {} if traceparent is None else {"traceparent": traceparent}
    return Assignment(
        id=task_id, name="add", args=[1], headers=headers, attempt=attempt, priority=priority
    )


def success(task_id: str = "t1") -> Outcome:
    return Outcome(task_id=task_id, ok=True, result=2, started_at=1.0, finished_at=2.0)


def failure(message: str = "division by zero") -> Outcome:
    error = TaskError(type="ZeroDivisionError", message=message, traceback="tb")
    return Outcome(task_id="t1", ok=False, error=error, started_at=1.0, finished_at=2.0)


def task_fields() -> dict[str, Any]:
    return {k: v for k, v in get_contextvars().items() if k in FIELDS}


def only_span(exported: InMemorySpanExporter) -> ReadableSpan:
    [span] = exported.get_finished_spans()
    return span


# --- log fields -------------------------------------------------------------------------------


def test_the_task_fields_are_bound_while_it_runs_and_unbound_after() -> None:
    instrument = TaskInstrument("sw-1")

    scope = instrument.begin(assignment())
    during = task_fields()
    instrument.end(scope, success())

    assert during == {
        "task_id": "t1",
        "task_name": "add",
        "worker_id": "sw-1",
        "trace_id": TRACE_ID,
    }
    assert get_contextvars() == {}


def test_without_a_traceparent_the_trace_id_field_is_none() -> None:
    instrument = TaskInstrument("sw-1")

    scope = instrument.begin(assignment(traceparent=None))
    during = task_fields()
    instrument.end(scope, success())

    assert during["trace_id"] is None
    assert get_contextvars() == {}


def test_fields_bound_before_the_task_are_restored_after_it() -> None:
    bind_contextvars(request="r-9", task_id="outer")
    instrument = TaskInstrument("sw-1")

    scope = instrument.begin(assignment())
    during = get_contextvars()
    instrument.end(scope, failure())

    assert (during["task_id"], during["request"]) == ("t1", "r-9")
    assert get_contextvars() == {"request": "r-9", "task_id": "outer"}


def test_the_fields_are_unbound_after_a_cancelled_run() -> None:
    instrument = TaskInstrument("sw-1")

    scope = instrument.begin(assignment())
    instrument.end(scope, None)

    assert get_contextvars() == {}


def test_a_log_line_written_while_the_task_runs_carries_its_fields() -> None:
    capture = LogCapture()
    logger = structlog.wrap_logger(
        None, processors=[structlog.contextvars.merge_contextvars, capture]
    )
    instrument = TaskInstrument("sw-1")

    scope = instrument.begin(assignment())
    logger.info("inside")
    instrument.end(scope, success())
    logger.info("outside")

    inside, outside = capture.entries
    assert {k: inside[k] for k in FIELDS} == {
        "task_id": "t1",
        "task_name": "add",
        "worker_id": "sw-1",
        "trace_id": TRACE_ID,
    }
    assert not set(FIELDS) & set(outside)


async def test_concurrent_async_tasks_each_see_only_their_own_fields() -> None:
    instrument = TaskInstrument("sw-1")
    both_running = asyncio.Barrier(2)

    async def run(task_id: str) -> dict[str, Any]:
        scope = instrument.begin(assignment(task_id))
        await both_running.wait()
        seen = task_fields()
        instrument.end(scope, success(task_id))
        return seen

    first, second = await asyncio.gather(run("a"), run("b"))

    assert (first["task_id"], second["task_id"]) == ("a", "b")
    assert get_contextvars() == {}


def test_without_a_tracer_there_is_no_span_and_no_current_span_change() -> None:
    instrument = TaskInstrument("sw-1")

    scope = instrument.begin(assignment())
    current = trace.get_current_span()
    instrument.end(scope, failure(), ZeroDivisionError("division by zero"))

    assert (scope.span, scope.context_token) == (None, None)
    assert current is trace.INVALID_SPAN


# --- the process span -------------------------------------------------------------------------


def test_a_run_is_a_consumer_span_named_process_and_its_task(
    traced: TaskInstrument, exported: InMemorySpanExporter
) -> None:
    scope = traced.begin(assignment())
    assert exported.get_finished_spans() == ()  # open while the task runs
    traced.end(scope, success())

    span = only_span(exported)
    assert (span.name, span.kind) == ("process add", SpanKind.CONSUMER)
    assert dict(span.attributes or {}) == {
        "messaging.system": "fastworker",
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": "high",
        "messaging.message.id": "t1",
        "fastworker.task.name": "add",
        "fastworker.attempt": 2,
        "fastworker.worker_id": "sw-1",
    }
    assert span.status.status_code is StatusCode.UNSET
    assert span.events == ()


def test_the_span_is_a_child_of_the_assignments_traceparent(
    traced: TaskInstrument, exported: InMemorySpanExporter
) -> None:
    traced.end(traced.begin(assignment()), success())

    span = only_span(exported)
    assert span.parent is not None
    assert (span.parent.trace_id, span.parent.span_id) == (
        int(TRACE_ID, 16),
        int(PARENT_SPAN_ID, 16),
    )
    assert span.parent.is_remote
    assert span.context is not None
    assert f"{span.context.trace_id:032x}" == TRACE_ID


def test_without_a_traceparent_the_span_is_a_root(
    traced: TaskInstrument, exported: InMemorySpanExporter
) -> None:
    traced.end(traced.begin(assignment(traceparent=None)), success())

    assert only_span(exported).parent is None


def test_an_assignment_without_a_priority_has_an_empty_destination(
    traced: TaskInstrument, exported: InMemorySpanExporter
) -> None:
    traced.end(traced.begin(assignment(priority=None, attempt=1)), success())

    attributes = only_span(exported).attributes or {}
    assert (attributes["messaging.destination.name"], attributes["fastworker.attempt"]) == (
        "",
        1,
    )


def test_the_span_is_current_while_the_task_runs_so_its_spans_nest_under_it(
    traced: TaskInstrument, exported: InMemorySpanExporter, provider: TracerProvider
) -> None:
    scope = traced.begin(assignment())
    current = trace.get_current_span()
    with provider.get_tracer("task code").start_as_current_span("query"):
        pass
    traced.end(scope, success())

    assert trace.get_current_span() is trace.INVALID_SPAN
    query, process = exported.get_finished_spans()
    assert current is scope.span
    assert process.context is not None
    assert query.parent is not None
    assert query.parent.span_id == process.context.span_id


def test_a_failed_outcome_marks_the_span_with_its_error_type_and_message(
    traced: TaskInstrument, exported: InMemorySpanExporter
) -> None:
    scope = traced.begin(assignment())
    traced.end(scope, failure(), ZeroDivisionError("division by zero"))

    span = only_span(exported)
    assert (span.status.status_code, span.status.description) == (
        StatusCode.ERROR,
        "division by zero",
    )
    assert (span.attributes or {})["error.type"] == "ZeroDivisionError"
    [event] = span.events
    assert event.name == "exception"
    assert (event.attributes or {})["exception.type"] == "ZeroDivisionError"


def test_a_failure_without_a_message_is_described_by_its_type(
    traced: TaskInstrument, exported: InMemorySpanExporter
) -> None:
    traced.end(traced.begin(assignment()), failure(message=""))

    span = only_span(exported)
    assert span.status.description == "ZeroDivisionError"
    assert span.events == ()  # no exception was passed


def test_a_failed_outcome_without_an_error_leaves_the_status_unset(
    traced: TaskInstrument, exported: InMemorySpanExporter
) -> None:
    traced.end(traced.begin(assignment()), Outcome(task_id="t1", ok=False))

    span = only_span(exported)
    assert span.status.status_code is StatusCode.UNSET
    assert "error.type" not in (span.attributes or {})


def test_a_cancelled_run_marks_the_span_cancelled(
    traced: TaskInstrument, exported: InMemorySpanExporter
) -> None:
    scope = traced.begin(assignment())
    traced.end(scope, None)

    span = only_span(exported)
    assert (span.status.status_code, span.status.description) == (StatusCode.ERROR, "cancelled")
    assert (span.attributes or {})["error.type"] == "cancelled"
    assert get_contextvars() == {}
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_a_cancelled_run_records_the_cancellation_when_given(
    traced: TaskInstrument, exported: InMemorySpanExporter
) -> None:
    scope = traced.begin(assignment())
    traced.end(scope, None, asyncio.CancelledError())

    span = only_span(exported)
    assert (span.attributes or {})["error.type"] == "cancelled"
    assert [e.name for e in span.events] == ["exception"]


async def test_concurrent_async_runs_get_separate_spans_with_their_own_parents(
    traced: TaskInstrument, exported: InMemorySpanExporter
) -> None:
    other_trace = "0af7651916cd43dd8448eb211c80319c"
    both_running = asyncio.Barrier(2)

    async def run(task_id: str, traceparent: str) -> None:
        scope = traced.begin(assignment(task_id, traceparent=traceparent))
        await both_running.wait()
        assert trace.get_current_span() is scope.span
        traced.end(scope, success(task_id))

    await asyncio.gather(run("a", TRACEPARENT), run("b", f"00-{other_trace}-{PARENT_SPAN_ID}-01"))

    by_task = {
        (s.attributes or {})["messaging.message.id"]: s for s in exported.get_finished_spans()
    }
    assert {k: f"{s.context.trace_id:032x}" for k, s in by_task.items() if s.context} == {
        "a": TRACE_ID,
        "b": other_trace,
    }
