"""The OTLP receiver test helper, proved against the real OpenTelemetry SDK and exporter."""

from __future__ import annotations

import asyncio
import http.client
import threading
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode
from otlp_receiver import OtlpReceiver, ReceivedSpan


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # the exporter must talk to loopback directly
    with OtlpReceiver() as r:
        yield r
    leaked = [t.name for t in threading.enumerate() if t.name.startswith("otlp-receiver")]
    assert leaked == [], f"receiver threads still running: {leaked}"


def _provider(
    receiver: OtlpReceiver, service: str = "x", compression: Compression | None = None
) -> TracerProvider:
    """A private tracer provider (the global one is left alone) exporting to ``receiver``."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": service}), shutdown_on_exit=False
    )
    exporter = OTLPSpanExporter(
        endpoint=receiver.endpoint + "/v1/traces", compression=compression, timeout=10
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _post(receiver: OtlpReceiver, path: str, body: bytes, content_type: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": content_type})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _one_named(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    matching = [span for span in spans if span.name == name]
    assert len(matching) == 1, f"expected one span named {name!r}, got {spans}"
    return matching[0]


def test_a_child_span_arrives_with_its_parent_link(receiver: OtlpReceiver) -> None:
    provider = _provider(receiver, service="x")
    try:
        tracer = provider.get_tracer("test_otlp_receiver")
        with tracer.start_as_current_span(
            "enqueue",
            kind=SpanKind.PRODUCER,
            attributes={
                "task.name": "add",
                "task.retries": 3,
                "task.weight": 0.5,
                "task.urgent": True,
                "task.tags": ["a", "b"],
            },
        ) as parent:
            with tracer.start_as_current_span("encode", attributes={"bytes": 42}) as child:
                child.add_event("encoded")
                child.set_status(Status(StatusCode.ERROR, "boom"))
            parent.set_status(Status(StatusCode.OK))
        expected_trace = format(parent.get_span_context().trace_id, "032x")
        expected_parent = format(parent.get_span_context().span_id, "016x")
        expected_child = format(child.get_span_context().span_id, "016x")
    finally:
        provider.shutdown()

    spans = receiver.wait_for(lambda spans: len(spans) >= 2, 10, "the parent and child spans")
    assert len(spans) == 2
    producer = _one_named(spans, "enqueue")
    encode = _one_named(spans, "encode")

    assert producer.service == encode.service == "x"
    assert producer.trace_id == encode.trace_id == expected_trace
    assert producer.span_id == expected_parent
    assert producer.parent_span_id is None
    assert encode.span_id == expected_child
    assert encode.parent_span_id == producer.span_id

    assert producer.kind == "PRODUCER"
    assert encode.kind == "INTERNAL"
    assert producer.attributes == {
        "task.name": "add",
        "task.retries": 3,
        "task.weight": 0.5,
        "task.urgent": True,
        "task.tags": ["a", "b"],
    }
    assert encode.attributes == {"bytes": 42}
    assert encode.events == ["encoded"]
    assert (producer.status_code, encode.status_code) == ("OK", "ERROR")
    assert producer.start_ns <= encode.start_ns <= encode.end_ns <= producer.end_ns
    assert receiver.trace(expected_trace.upper()) == spans
    assert receiver.trace("0" * 32) == []


def test_gzip_compressed_exports_are_decoded(receiver: OtlpReceiver) -> None:
    provider = _provider(receiver, service="zipped", compression=Compression.Gzip)
    try:
        with provider.get_tracer("gzip").start_as_current_span("compressed", kind=SpanKind.CLIENT):
            pass
    finally:
        provider.shutdown()

    spans = receiver.wait_for(lambda spans: len(spans) == 1, 10, "the compressed span")
    assert (spans[0].service, spans[0].name, spans[0].kind) == ("zipped", "compressed", "CLIENT")
    assert receiver.rejections() == []


def test_garbage_gets_a_400_and_the_receiver_keeps_working(receiver: OtlpReceiver) -> None:
    status, reason = _post(receiver, "/v1/traces", b"\x00garbage\xff\xff", "application/x-protobuf")
    assert status == 400
    assert b"not an ExportTraceServiceRequest" in reason

    status, reason = _post(receiver, "/v1/traces", b"{}", "application/json")
    assert status == 400
    assert b"Content-Type" in reason

    status, _ = _post(receiver, "/v1/metrics", b"", "application/x-protobuf")
    assert status == 404
    assert [code for code, _ in receiver.rejections()] == [400, 400, 404]

    provider = _provider(receiver, service="after-garbage")
    try:
        with provider.get_tracer("still-working").start_as_current_span("survivor"):
            pass
    finally:
        provider.shutdown()
    spans = receiver.wait_for(lambda spans: len(spans) == 1, 10, "a span after the garbage")
    assert (spans[0].service, spans[0].name) == ("after-garbage", "survivor")


def test_wait_for_times_out_with_a_summary_of_what_arrived(receiver: OtlpReceiver) -> None:
    provider = _provider(receiver, service="lonely")
    try:
        with provider.get_tracer("timeout").start_as_current_span("only-one"):
            pass
    finally:
        provider.shutdown()

    with pytest.raises(
        AssertionError, match=r"timed out after 0\.2 s waiting for two spans"
    ) as info:
        receiver.wait_for(lambda spans: len(spans) >= 2, 0.2, "two spans")
    assert "lonely/only-one" in str(info.value)


async def test_wait_for_async_returns_once_a_span_is_exported_from_another_thread(
    receiver: OtlpReceiver,
) -> None:
    provider = _provider(receiver, service="async")

    def export_one() -> None:
        with provider.get_tracer("async").start_as_current_span("from-a-thread"):
            pass

    try:
        exporting = asyncio.create_task(asyncio.to_thread(export_one))
        spans = await receiver.wait_for_async(
            lambda spans: any(span.name == "from-a-thread" for span in spans), 10, "the span"
        )
        await exporting
    finally:
        provider.shutdown()
    assert [span.service for span in spans] == ["async"]
