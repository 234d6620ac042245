"""OpenTelemetry in the SDK: when the ``OTEL_*`` variables ask for traces, the trace id
in a ``traceparent``, the messaging attributes, and the ``send`` spans around a
submission. Spans go to an in-memory exporter through a local tracer provider: the global
one is never set (it can be set only once per process)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from fastworker import __version__, tracing
from fastworker.tracing import (
    TRACEPARENT,
    TracingUnavailable,
    configure_tracing,
    messaging_attributes,
    send_spans,
    trace_id_of,
    tracing_requested,
)
from fastworker_protocol import Priority, TaskSpec

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


# --- tracing_requested ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"OTEL_SERVICE_NAME": "svc"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": ""},
        {"OTEL_TRACES_EXPORTER": "none", **ENDPOINT},
        {"OTEL_TRACES_EXPORTER": " None "},
        {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"},
        {"OTEL_SDK_DISABLED": " TRUE ", **ENDPOINT},
    ],
)
def test_tracing_is_not_requested_without_an_exporter_or_when_disabled(
    env: dict[str, str],
) -> None:
    assert tracing_requested(env) is False


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_TRACES_EXPORTER": "otlp"},
        {"OTEL_TRACES_EXPORTER": "Console"},
        {"OTEL_TRACES_EXPORTER": "zipkin"},  # requested, though configure_tracing refuses it
        ENDPOINT,
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"},
        {"OTEL_TRACES_EXPORTER": "", **ENDPOINT},
        {"OTEL_SDK_DISABLED": "false", **ENDPOINT},
        {"OTEL_SDK_DISABLED": "1", "OTEL_TRACES_EXPORTER": "otlp"},  # only "true" disables
    ],
)
def test_tracing_is_requested_by_an_exporter_or_an_otlp_endpoint(env: dict[str, str]) -> None:
    assert tracing_requested(env) is True


# --- configure_tracing ----------------------------------------------------------------------


class Installed:
    """What ``configure_tracing`` passed to ``trace.set_tracer_provider``, shut down after."""

    def __init__(self) -> None:
        self.providers: list[TracerProvider] = []

    def __call__(self, provider: TracerProvider) -> None:
        self.providers.append(provider)

    def shutdown(self) -> None:
        for provider in self.providers:
            provider.shutdown()


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Installed]:
    captured = Installed()
    monkeypatch.setattr(trace, "set_tracer_provider", captured)
    yield captured
    captured.shutdown()


def configured(service_name: str, env: Mapping[str, str]) -> TracerProvider:
    provider = configure_tracing(service_name, env)
    assert provider is not None
    return provider


def test_configure_tracing_does_nothing_when_not_requested(installed: Installed) -> None:
    assert configure_tracing("svc", {}) is None
    assert configure_tracing("svc", {"OTEL_TRACES_EXPORTER": "none", **ENDPOINT}) is None
    assert installed.providers == []


def test_configure_tracing_installs_and_returns_a_provider_named_after_the_service(
    installed: Installed,
) -> None:
    provider = configured("fastworker-client", {"OTEL_TRACES_EXPORTER": "console"})

    assert installed.providers == [provider]
    assert provider.resource.attributes["service.name"] == "fastworker-client"


def test_otel_service_name_overrides_the_service_name(installed: Installed) -> None:
    provider = configured(
        "fastworker-client", {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "shop"}
    )

    assert provider.resource.attributes["service.name"] == "shop"


def exporters(monkeypatch: pytest.MonkeyPatch) -> list[SpanExporter]:
    """Record the exporter each batch span processor is made with."""
    from opentelemetry.sdk.trace import export

    made: list[SpanExporter] = []

    class Recording(export.BatchSpanProcessor):
        def __init__(self, exporter: SpanExporter) -> None:
            made.append(exporter)
            super().__init__(exporter)

    monkeypatch.setattr(export, "BatchSpanProcessor", Recording)
    return made


def test_the_console_exporter_is_used_when_asked(
    installed: Installed, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = exporters(monkeypatch)

    configured("svc", {"OTEL_TRACES_EXPORTER": "console"})

    assert [type(e) for e in made] == [ConsoleSpanExporter]


@pytest.mark.parametrize(
    "env",
    [
        ENDPOINT,
        {"OTEL_TRACES_EXPORTER": "OTLP"},
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
        {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",  # the traces one wins
        },
    ],
)
def test_otlp_over_http_is_the_default_exporter(
    installed: Installed, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    made = exporters(monkeypatch)

    configured("svc", env)

    assert [type(e) for e in made] == [OTLPSpanExporter]


def test_the_otlp_exporter_sends_to_the_endpoint_of_the_given_env(
    installed: Installed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    made = exporters(monkeypatch)

    configured("svc", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.example:4318"})

    [exporter] = made
    assert getattr(exporter, "_endpoint", None) == "http://collector.example:4318/v1/traces"


def test_an_unsupported_exporter_is_refused(installed: Installed) -> None:
    with pytest.raises(TracingUnavailable, match="'zipkin' is not supported"):
        configure_tracing("svc", {"OTEL_TRACES_EXPORTER": "zipkin"})
    assert installed.providers == []


def test_an_unsupported_otlp_protocol_is_refused(installed: Installed) -> None:
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", **ENDPOINT}

    with pytest.raises(TracingUnavailable, match="'http/json' is not supported"):
        configure_tracing("svc", env)
    assert installed.providers == []


def test_otlp_over_grpc_without_its_exporter_installed_is_refused(
    installed: Installed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc.trace_exporter", None)
    env = {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", **ENDPOINT}

    with pytest.raises(TracingUnavailable, match="grpc"):
        configure_tracing("svc", env)
    assert installed.providers == []


def test_tracing_asked_for_without_the_sdk_installed_is_refused(
    installed: Installed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.resources", None)

    with pytest.raises(TracingUnavailable, match="SDK is not installed"):
        configure_tracing("svc", ENDPOINT)


def test_configure_tracing_reads_the_process_environment_by_default(
    installed: Installed, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")

    assert configure_tracing("svc") is None

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    provider = configure_tracing("svc")
    assert provider is not None
    assert installed.providers == [provider]


# --- active_tracer ---------------------------------------------------------------------------


def test_there_is_no_tracer_without_a_real_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    assert tracing.active_tracer() is None

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", trace.NoOpTracerProvider())
    assert tracing.active_tracer() is None


def test_the_provider_global_active_tracer_reads_is_where_the_api_keeps_it() -> None:
    """``active_tracer`` reads ``trace._TRACER_PROVIDER`` for speed: fail loudly if the
    OpenTelemetry API ever stops keeping the installed provider there."""
    probe = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from fastworker.tracing import active_tracer\n"
        "assert active_tracer() is None\n"
        "provider = TracerProvider()\n"
        "trace.set_tracer_provider(provider)\n"
        "assert trace._TRACER_PROVIDER is provider\n"
        "assert active_tracer() is not None\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_the_tracer_of_a_real_provider_is_made_once_and_named_fastworker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    monkeypatch.setattr(tracing, "_tracers", {})

    first, second = tracing.active_tracer(), tracing.active_tracer()

    assert first is not None
    assert first is second
    first.start_span("probe").end()
    [span] = exporter.get_finished_spans()
    assert span.instrumentation_scope is not None
    assert (span.instrumentation_scope.name, span.instrumentation_scope.version) == (
        "fastworker",
        __version__,
    )
    provider.shutdown()


# --- trace_id_of and messaging_attributes ----------------------------------------------------


def test_the_trace_id_of_a_valid_traceparent() -> None:
    assert trace_id_of({TRACEPARENT: f"00-{TRACE_ID}-{SPAN_ID}-01"}) == TRACE_ID
    assert trace_id_of({TRACEPARENT: f"00-{TRACE_ID}-{SPAN_ID}-00", "other": "x"}) == TRACE_ID


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"tracestate": "k=v"},
        {TRACEPARENT: ""},
        {TRACEPARENT: "garbage"},
        {TRACEPARENT: f"00-{TRACE_ID}-{SPAN_ID}"},  # three parts
        {TRACEPARENT: f"00-{TRACE_ID}-{SPAN_ID}-01-extra"},  # five parts
        {TRACEPARENT: f"00-{TRACE_ID[:-1]}-{SPAN_ID}-01"},  # 31 digits
        {TRACEPARENT: f"00-{TRACE_ID}0-{SPAN_ID}-01"},  # 33 digits
        {TRACEPARENT: f"00-{'0' * 32}-{SPAN_ID}-01"},  # the invalid all-zero trace id
        {"Traceparent": f"00-{TRACE_ID}-{SPAN_ID}-01"},  # headers are lowercase
    ],
)
def test_a_missing_or_malformed_traceparent_has_no_trace_id(headers: dict[str, str]) -> None:
    assert trace_id_of(headers) is None


@pytest.mark.parametrize(
    "traceparent",
    [
        f"00-{'z' * 32}-{SPAN_ID}-01",
        f"00-{TRACE_ID.upper()}-{SPAN_ID}-01",
        f"00-{TRACE_ID}-{'0' * 16}-01",
        f"ff-{TRACE_ID}-{SPAN_ID}-01",
        f"00-{TRACE_ID}-xyz-01",
    ],
)
def test_a_traceparent_the_propagator_rejects_has_no_trace_id(traceparent: str) -> None:
    assert trace_id_of({TRACEPARENT: traceparent}) is None


def test_messaging_attributes_follow_the_conventions() -> None:
    assert messaging_attributes("send", "send", "add", "t1", "high") == {
        "messaging.system": "fastworker",
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.destination.name": "high",
        "messaging.message.id": "t1",
        "fastworker.task.name": "add",
    }


# --- send_spans ------------------------------------------------------------------------------


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    provider = TracerProvider()
    yield provider
    provider.shutdown()


@pytest.fixture
def exported(provider: TracerProvider, monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "active_tracer", lambda: provider.get_tracer("t"))
    return exporter


def specs(*names: str) -> list[TaskSpec]:
    return [
        TaskSpec(name=name, id=f"id-{n}", args=[n], headers={"x-tenant": "a"})
        for n, name in enumerate(names)
    ]


def test_without_a_tracer_the_specs_go_out_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "active_tracer", lambda: None)
    submitted = specs("add", "mul")

    with send_spans(submitted, Priority.NORMAL) as out:
        assert out == submitted
        assert all(TRACEPARENT not in spec.headers for spec in out)


def test_without_a_tracer_an_error_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "active_tracer", lambda: None)

    with pytest.raises(KeyError), send_spans(specs("add"), Priority.NORMAL):
        raise KeyError("x")


def test_each_spec_gets_a_producer_span_named_send_and_its_task(
    exported: InMemorySpanExporter,
) -> None:
    with send_spans(specs("add", "mul"), Priority.HIGH) as out:
        assert exported.get_finished_spans() == ()  # open while submitting
        assert len(out) == 2

    spans = exported.get_finished_spans()
    assert [s.name for s in spans] == ["send add", "send mul"]
    assert all(s.kind is SpanKind.PRODUCER for s in spans)
    assert dict(spans[0].attributes or {}) == messaging_attributes(
        "send", "send", "add", "id-0", "high"
    )
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)


def test_each_traced_spec_carries_its_own_spans_context(
    exported: InMemorySpanExporter,
) -> None:
    submitted = specs("add", "mul")

    with send_spans(submitted, Priority.NORMAL) as out:
        pass

    spans = exported.get_finished_spans()
    for spec, span in zip(out, spans, strict=True):
        context = span.get_span_context()
        assert context is not None
        assert spec.headers[TRACEPARENT] == (
            f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
        )
        assert context.trace_flags.sampled
        assert trace_id_of(spec.headers) == f"{context.trace_id:032x}"
        assert spec.headers["x-tenant"] == "a"
    assert len({trace_id_of(spec.headers) for spec in out}) == 2  # a root span each
    assert [(s.name, s.id, s.args) for s in out] == [(s.name, s.id, s.args) for s in submitted]
    assert all(TRACEPARENT not in spec.headers for spec in submitted)  # not mutated


def test_send_spans_are_children_of_the_current_span(
    exported: InMemorySpanExporter, provider: TracerProvider
) -> None:
    with provider.get_tracer("app").start_as_current_span("checkout") as parent:
        with send_spans(specs("add", "mul"), Priority.NORMAL) as out:
            pass
        parent_context = parent.get_span_context()

    sends = [s for s in exported.get_finished_spans() if s.name.startswith("send")]
    assert all(s.parent is not None and s.parent.span_id == parent_context.span_id for s in sends)
    assert {trace_id_of(spec.headers) for spec in out} == {f"{parent_context.trace_id:032x}"}


def test_an_error_while_submitting_marks_every_span_failed_and_is_reraised(
    exported: InMemorySpanExporter,
) -> None:
    class Unreachable(ConnectionError):
        pass

    with pytest.raises(Unreachable), send_spans(specs("add", "mul"), Priority.LOW):
        raise Unreachable("control plane down")

    spans: tuple[ReadableSpan, ...] = exported.get_finished_spans()
    assert len(spans) == 2
    for span in spans:
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "control plane down"
        assert (span.attributes or {})["error.type"] == (
            "test_an_error_while_submitting_marks_every_span_failed_and_is_reraised"
            ".<locals>.Unreachable"
        )
        assert [e.name for e in span.events] == ["exception"]


def test_a_cancelled_submission_still_ends_its_spans(exported: InMemorySpanExporter) -> None:
    class Stop(BaseException):
        pass

    with pytest.raises(Stop), send_spans(specs("add"), Priority.NORMAL):
        raise Stop

    [span] = exported.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description is not None
    assert span.status.description.endswith(".<locals>.Stop")


def test_no_specs_make_no_spans(exported: InMemorySpanExporter) -> None:
    with send_spans([], Priority.NORMAL) as out:
        assert out == []

    assert exported.get_finished_spans() == ()
