"""A real OTLP/HTTP trace receiver for tests: what an OpenTelemetry collector would see.

``OtlpReceiver`` listens on a free 127.0.0.1 port in a background thread, accepts
``POST /v1/traces`` (binary protobuf, optionally gzip-compressed) exactly as the SDK's
``OTLPSpanExporter`` sends it, and keeps every span as a plain ``ReceivedSpan`` that tests
can wait for and assert on::

    with OtlpReceiver() as receiver:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        ...
        receiver.wait_for(lambda spans: len(spans) >= 2, 10, "two spans")
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gzip
import json
import signal
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import cast

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

TRACES_PATH = "/v1/traces"
SPANS_PATH = "/spans"
PROTOBUF = "application/x-protobuf"
MAX_BODY = 64 * 1024 * 1024
ASYNC_POLL_INTERVAL = 0.01


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, decoded into plain Python values."""

    service: str
    name: str
    trace_id: str  # 32 lowercase hex digits
    span_id: str  # 16 lowercase hex digits
    parent_span_id: str | None  # None for a root span
    kind: str  # "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER" (or "UNSPECIFIED")
    start_ns: int
    end_ns: int
    attributes: dict[str, object]  # arrays become lists, key-value lists become dicts
    status_code: str  # "UNSET", "OK", "ERROR"
    events: list[str]  # event names, in order

    def describe(self) -> str:
        parent = self.parent_span_id or "-"
        return (
            f"{self.service}/{self.name} kind={self.kind} trace={self.trace_id} "
            f"span={self.span_id} parent={parent} status={self.status_code}"
        )


def unwrap(value: AnyValue) -> object:
    """An OTLP ``AnyValue`` as the Python value it carries."""
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "bool_value":
        return value.bool_value
    if which == "int_value":
        return value.int_value
    if which == "double_value":
        return value.double_value
    if which == "bytes_value":
        return value.bytes_value
    if which == "array_value":
        return [unwrap(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    return None


def attributes_of(pairs: Iterable[KeyValue]) -> dict[str, object]:
    return {pair.key: unwrap(pair.value) for pair in pairs}


def _enum_name(full: str, prefix: str) -> str:
    return full.removeprefix(prefix)


def decode_spans(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    """Every span of one export request, with the service name of its resource."""
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = attributes_of(resource_spans.resource.attributes)
        service = str(resource.get("service.name", ""))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        service=service,
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex() or None,
                        kind=_enum_name(Span.SpanKind.Name(span.kind), "SPAN_KIND_"),
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        attributes=attributes_of(span.attributes),
                        status_code=_enum_name(
                            Status.StatusCode.Name(span.status.code), "STATUS_CODE_"
                        ),
                        events=[event.name for event in span.events],
                    )
                )
    return spans


class _Rejected(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class _Server(ThreadingHTTPServer):
    receiver: OtlpReceiver


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, so no handler thread idles on a keep-alive
    # connection when the receiver shuts down.
    protocol_version = "HTTP/1.0"
    server_version = "OtlpReceiver/1"

    @property
    def receiver(self) -> OtlpReceiver:
        return cast(_Server, self.server).receiver

    def log_message(self, format: str, *args: object) -> None:
        """Stay quiet: pytest would show every request on stderr."""

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _reject(self, status: int, reason: str) -> None:
        self.receiver._record_rejection(status, reason)
        self._reply(status, reason.encode() + b"\n", "text/plain; charset=utf-8")

    def _body(self) -> bytes:
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            raise _Rejected(400, "Content-Length required")
        try:
            length = int(length_header)
        except ValueError:
            raise _Rejected(400, f"bad Content-Length {length_header!r}") from None
        if not 0 <= length <= MAX_BODY:
            raise _Rejected(400, f"Content-Length {length} out of range")
        body = self.rfile.read(length)
        if len(body) != length:
            raise _Rejected(400, f"body ended after {len(body)} of {length} bytes")
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        try:
            if encoding == "gzip":
                return gzip.decompress(body)
            if encoding == "deflate":
                return zlib.decompress(body)
        except (OSError, EOFError, zlib.error) as exc:
            raise _Rejected(400, f"bad {encoding} body: {exc}") from None
        if encoding != "identity":
            raise _Rejected(400, f"unsupported Content-Encoding {encoding!r}")
        return body

    def _export(self) -> None:
        if self.path.split("?", 1)[0] != TRACES_PATH:
            raise _Rejected(404, f"no such path {self.path!r}; POST {TRACES_PATH}")
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip()
        if content_type.lower() != PROTOBUF:
            raise _Rejected(400, f"Content-Type must be {PROTOBUF}, not {content_type!r}")
        body = self._body()
        try:
            request = ExportTraceServiceRequest.FromString(body)
        except Exception as exc:  # google.protobuf's DecodeError (it ships no type stubs)
            raise _Rejected(400, f"not an ExportTraceServiceRequest: {exc}") from None
        self.receiver._add(decode_spans(request))
        self._reply(200, ExportTraceServiceResponse().SerializeToString(), PROTOBUF)

    def do_POST(self) -> None:
        try:
            self._export()
        except _Rejected as rejected:
            self._reject(rejected.status, rejected.reason)
        except Exception as exc:  # never let one request kill the handler
            self._reject(500, f"receiver error: {exc!r}")

    def _not_found(self) -> None:
        self._reject(404, f"{self.command} {self.path} not served; POST {TRACES_PATH}")

    def do_GET(self) -> None:
        """``GET /spans``: every span so far as JSON (for a receiver in a container)."""
        if self.path.split("?", 1)[0] != SPANS_PATH:
            self._not_found()
            return
        body = json.dumps([dataclasses.asdict(s) for s in self.receiver.spans()]).encode()
        self._reply(200, body, "application/json")

    def do_HEAD(self) -> None:
        self._not_found()

    def do_PUT(self) -> None:
        self._not_found()

    def do_DELETE(self) -> None:
        self._not_found()

    def do_PATCH(self) -> None:
        self._not_found()


class OtlpReceiver:
    """An OTLP/HTTP trace endpoint on 127.0.0.1 that remembers every span it receives."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._address = (host, port)
        self._condition = threading.Condition()
        self._spans: list[ReceivedSpan] = []
        self._rejections: list[tuple[int, str]] = []
        self._exports = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> OtlpReceiver:
        if self._server is not None:
            raise RuntimeError("OtlpReceiver already started")
        server = _Server(self._address, _Handler)
        server.receiver = self
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"otlp-receiver-{server.server_address[1]}",
            daemon=True,
        )
        try:
            thread.start()
        except BaseException:
            server.server_close()
            raise
        self._server, self._thread = server, thread
        return self

    def close(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None or thread is None:
            return
        try:
            server.shutdown()
            thread.join()
        finally:
            server.server_close()  # also joins the request handler threads

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # addresses

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("OtlpReceiver is not running; use it as a context manager")
        return int(self._server.server_address[1])

    @property
    def endpoint(self) -> str:
        """The base URL for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def traces_url(self) -> str:
        """The full URL, for an exporter given ``endpoint=`` directly."""
        return self.endpoint + TRACES_PATH

    # what arrived

    def _add(self, spans: list[ReceivedSpan]) -> None:
        with self._condition:
            self._spans.extend(spans)
            self._exports += 1
            self._condition.notify_all()

    def _record_rejection(self, status: int, reason: str) -> None:
        with self._condition:
            self._rejections.append((status, reason))
            self._condition.notify_all()

    def spans(self) -> list[ReceivedSpan]:
        """A snapshot of every span received so far, in arrival order."""
        with self._condition:
            return list(self._spans)

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        """The spans received so far for one trace (32 hex digits, any case)."""
        wanted = trace_id.lower()
        return [span for span in self.spans() if span.trace_id == wanted]

    @property
    def exports(self) -> int:
        """How many export requests were accepted."""
        with self._condition:
            return self._exports

    def rejections(self) -> list[tuple[int, str]]:
        """(HTTP status, reason) of every request that was refused."""
        with self._condition:
            return list(self._rejections)

    def summary(self, limit: int = 40) -> str:
        spans = self.spans()
        if not spans:
            text = "no spans"
        else:
            lines = [span.describe() for span in spans[:limit]]
            if len(spans) > limit:
                lines.append(f"... and {len(spans) - limit} more")
            text = f"{len(spans)} span(s):\n  " + "\n  ".join(lines)
        rejections = self.rejections()
        if rejections:
            text += f"\n{len(rejections)} rejected request(s), last: {rejections[-1]}"
        return text

    # waiting

    def wait_for(
        self,
        predicate: Callable[[list[ReceivedSpan]], bool],
        timeout: float = 10.0,
        what: str = "spans",
    ) -> list[ReceivedSpan]:
        """Block until ``predicate(spans)`` holds; return the spans it held for.

        Re-checked after every export; raises AssertionError after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                snapshot = list(self._spans)
                if predicate(snapshot):
                    return snapshot
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._condition.wait(remaining)
        raise AssertionError(
            f"timed out after {timeout} s waiting for {what}; got: {self.summary()}"
        )

    async def wait_for_async(
        self,
        predicate: Callable[[list[ReceivedSpan]], bool],
        timeout: float = 10.0,
        what: str = "spans",
    ) -> list[ReceivedSpan]:
        """``wait_for`` for async tests: polls without blocking the event loop."""
        deadline = time.monotonic() + timeout
        while True:
            snapshot = self.spans()
            if predicate(snapshot):
                return snapshot
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"timed out after {timeout} s waiting for {what}; got: {self.summary()}"
                )
            await asyncio.sleep(ASYNC_POLL_INTERVAL)


def main() -> None:
    """Serve until killed: the stand-in for Jaeger in the offline compose override."""
    parser = argparse.ArgumentParser(description="An OTLP/HTTP trace receiver.")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=4318)
    args = parser.parse_args()
    receiver = OtlpReceiver(args.host, args.port).start()
    print(f"receiving OTLP/HTTP traces on {args.host}:{args.port}; GET {SPANS_PATH}", flush=True)
    # As a container's PID 1 the kernel ignores SIGTERM unless a handler is set: without
    # one, `docker compose down` waits out its whole timeout and then kills.
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stopped.set())
    try:
        stopped.wait()
    finally:
        receiver.close()


if __name__ == "__main__":
    main()
