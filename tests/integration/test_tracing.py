"""One task is one trace across three processes, exported over real OTLP/HTTP.

The client (the ``fastworker submit`` command), the control plane and a subworker each
export with the real OpenTelemetry SDK exporter to ``OtlpReceiver``, which decodes the
real protobuf. Links are checked span by span: ``send`` -> ``dispatch`` -> ``process``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from harness import Cluster
from otlp_receiver import OtlpReceiver, ReceivedSpan


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as r:
        yield r


def otel_env(cluster: Cluster, receiver: OtlpReceiver) -> dict[str, str]:
    return cluster.env(
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY="50",  # export within 50 ms instead of 5 s
        NO_PROXY="127.0.0.1",
        no_proxy="127.0.0.1",
    )


async def start_traced_cluster(cluster: Cluster, env: dict[str, str]) -> None:
    cluster.control_plane(local_concurrency=0, env=env)
    cluster.subworker(env=env)
    async with cluster.client() as client:
        await cluster.workers(client, 1)


def submit_with_cli(cluster: Cluster, env: dict[str, str], *args: str) -> dict[str, object]:
    """Run the client as its own process: ``fastworker submit ... --json``."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "fastworker.cli", "submit", "--json"),
            *("--discovery-address", cluster.discovery, "--timeout", "20", *args),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def only(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    matching = [s for s in spans if s.name == name]
    assert len(matching) == 1, [s.describe() for s in spans]
    return matching[0]


async def test_one_task_is_one_trace_whose_spans_come_from_three_processes(
    cluster: Cluster, receiver: OtlpReceiver
) -> None:
    env = otel_env(cluster, receiver)
    await start_traced_cluster(cluster, env)

    result = submit_with_cli(cluster, env, "--task-name", "add", "--args", "2", "3")
    task_id = result["task_id"]

    def complete(spans: list[ReceivedSpan]) -> bool:
        mine = [s for s in spans if s.attributes.get("messaging.message.id") == task_id]
        return {s.name for s in mine} >= {
            "send add",
            "dispatch it_tasks.add",
            "process it_tasks.add",
        }

    spans = await receiver.wait_for_async(complete, 15, "the task's three spans")
    mine = [s for s in spans if s.attributes.get("messaging.message.id") == task_id]
    # the client's span names what it sent; the control plane's, the full name it stands for
    send = only(mine, "send add")
    dispatch, process = (only(mine, f"{op} it_tasks.add") for op in ("dispatch", "process"))

    assert len({s.trace_id for s in mine}) == 1
    assert (send.service, dispatch.service, process.service) == (
        "fastworker-cli",
        "fastworker-control-plane",
        "fastworker-subworker",
    )
    assert send.parent_span_id is None
    assert dispatch.parent_span_id == send.span_id
    assert process.parent_span_id == dispatch.span_id
    assert (send.kind, dispatch.kind, process.kind) == ("PRODUCER", "PRODUCER", "CONSUMER")
    for span in mine:
        assert span.attributes["messaging.system"] == "fastworker"
        assert span.attributes["messaging.destination.name"] == "normal"
        assert span.status_code != "ERROR"
    assert process.attributes["messaging.operation.type"] == "process"
    assert process.attributes["fastworker.attempt"] == 1
    assert dispatch.start_ns <= process.start_ns <= process.end_ns


async def test_a_retried_task_shows_each_attempt_in_its_trace(
    cluster: Cluster, receiver: OtlpReceiver
) -> None:
    env = otel_env(cluster, receiver)
    await start_traced_cluster(cluster, env)

    counter = cluster.tmp / "flaky-count"
    result = submit_with_cli(
        cluster,
        env,
        "--task-name",
        "flaky",
        "--kwargs",
        json.dumps({"path": str(counter), "succeed_on": 3}),
    )
    assert (result["status"], result["attempts"]) == ("success", 3)
    task_id = result["task_id"]

    def three_attempts(spans: list[ReceivedSpan]) -> bool:
        mine = [s for s in spans if s.attributes.get("messaging.message.id") == task_id]
        return sum(s.name == "process it_tasks.flaky" for s in mine) == 3

    spans = await receiver.wait_for_async(three_attempts, 15, "three process spans")
    mine = [s for s in spans if s.attributes.get("messaging.message.id") == task_id]
    send = only(mine, "send flaky")
    dispatches = sorted(
        (s for s in mine if s.name == "dispatch it_tasks.flaky"),
        key=lambda s: s.attributes["fastworker.attempt"],  # type: ignore[arg-type, return-value]
    )
    processes = {s.parent_span_id: s for s in mine if s.name == "process it_tasks.flaky"}

    assert len({s.trace_id for s in mine}) == 1
    assert [d.attributes["fastworker.attempt"] for d in dispatches] == [1, 2, 3]
    for attempt, dispatch in enumerate(dispatches, 1):
        assert dispatch.parent_span_id == send.span_id
        process = processes[dispatch.span_id]  # each attempt's run hangs under its dispatch
        assert process.attributes["fastworker.attempt"] == attempt
        if attempt < 3:
            assert process.status_code == "ERROR"
            assert process.attributes["error.type"] == "RuntimeError"
            assert "exception" in process.events
        else:
            assert process.status_code != "ERROR"
            assert "error.type" not in process.attributes


async def test_a_task_logs_with_the_trace_id_of_its_trace(
    cluster: Cluster, receiver: OtlpReceiver
) -> None:
    env = otel_env(cluster, receiver)
    await start_traced_cluster(cluster, env)

    result = submit_with_cli(cluster, env, "--task-name", "chatty", "--args", "hello")
    spans = await receiver.wait_for_async(
        lambda spans: any(s.name == "process it_tasks.chatty" for s in spans),
        15,
        "the process span",
    )
    trace_id = only(spans, "process it_tasks.chatty").trace_id

    subworker = next(p for p in cluster.procs if p.name == "subworker")
    lines = [json.loads(line) for line in subworker.output().splitlines() if line.startswith("{")]
    said = [line for line in lines if line.get("task_id") == result["task_id"]]
    assert {line["event"] for line in said} >= {"stdlib says hello", "structlog says"}
    assert {line["trace_id"] for line in said} == {trace_id}
