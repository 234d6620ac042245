"""Process pools in operation: their logs, traces and metrics, a drain, the death of
their subworker, recycling by memory, the control plane's own pool, and no late starts."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from harness import Cluster, wait_until
from otlp_receiver import OtlpReceiver, ReceivedSpan
from procfs import alive, children_of
from prometheus_client.parser import text_string_to_metric_families
from test_logs import json_lines
from test_tracing import otel_env, submit_with_cli

from fastworker import Client, TaskStatus
from fastworker.testing import free_port_block


async def scrape(port: int) -> dict[str, float]:
    """Every unlabelled sample of a subworker's /metrics, by name."""
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as r:
        text = await r.text()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


@pytest.fixture
async def metered(cluster: Cluster) -> AsyncIterator[tuple[Client, int]]:
    """One subworker with two children and a metrics port; the control plane runs nothing."""
    cluster.control_plane(local_concurrency=0)
    port = free_port_block(1)
    cluster.subworker(
        "--task-modules", "it_processes", "--processes", "2", "--metrics-port", str(port)
    )
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        yield client, port


async def test_the_pool_reports_its_children_and_their_crashes_and_terminations(
    metered: tuple[Client, int], tmp_path: Path
) -> None:
    client, port = metered
    assert (await scrape(port))["fastworker_subworker_processes"] == 2
    crashed = await client.submit_task(
        "crash_once", args=(str(tmp_path / "marker"), "exit"), timeout=30
    )
    timed_out = await client.submit_task(
        "late_write", args=(str(tmp_path / "late"), 3.0), timeout=30
    )
    assert crashed.status == TaskStatus.SUCCESS
    assert timed_out.error is not None
    assert timed_out.error.reason == "timeout"

    async def replaced() -> bool:
        return (await scrape(port))["fastworker_subworker_processes"] == 2

    await wait_until(replaced, 15, "both children to be replaced")
    metrics = await scrape(port)
    assert metrics["fastworker_subworker_process_crashed_total"] == 1
    assert metrics["fastworker_subworker_process_terminated_total"] == 1
    assert metrics["fastworker_subworker_process_recycled_total"] == 0


async def test_a_process_task_logs_with_its_fields_and_its_child_pid(cluster: Cluster) -> None:
    cluster.control_plane(local_concurrency=0)
    subworker = cluster.subworker("--task-modules", "it_processes", "--processes", "1")
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        [worker] = await client.list_workers()
        result = await client.submit_task("chatty_child", ["hi"], timeout=20)
        assert result.status == TaskStatus.SUCCESS, result.error

        async def logged() -> bool:
            return "child structlog says" in subworker.output()

        await wait_until(logged, 5, "the task's log lines")
    said = {
        str(line["event"]): line
        for line in json_lines(subworker.output())
        if line.get("task_id") == result.task_id
    }
    assert set(said) == {"child stdlib says hi", "child structlog says"}
    for line in said.values():
        assert line["task_name"] == "it_processes.chatty_child"
        assert line["worker_id"] == worker.worker_id
        assert line["child_pid"] == result.result


def _of(spans: list[ReceivedSpan], task_id: object) -> list[ReceivedSpan]:
    return [s for s in spans if s.attributes.get("messaging.message.id") == task_id]


async def test_a_process_tasks_spans_nest_under_dispatch_even_when_its_child_is_killed(
    cluster: Cluster, tmp_path: Path
) -> None:
    with OtlpReceiver() as receiver:
        env = otel_env(cluster, receiver)
        cluster.control_plane(local_concurrency=0, env=env)
        cluster.subworker("--task-modules", "it_processes", "--processes", "1", env=env)
        async with cluster.client() as client:
            await cluster.workers(client, 1)
            ran = submit_with_cli(cluster, env, "--task-name", "traced_child")
            killed = await client.submit_task("late_write", [str(tmp_path / "x"), 3], timeout=20)
        assert killed.error is not None
        assert killed.error.reason == "timeout"

        def complete(spans: list[ReceivedSpan]) -> bool:
            names = {s.name for s in spans}
            return {
                "process it_processes.traced_child",
                "inner work",
                "process it_processes.late_write",
            } <= names

        spans = await receiver.wait_for_async(complete, 20, "the process tasks' spans")
    [dispatch] = [
        s for s in _of(spans, ran["task_id"]) if s.name == "dispatch it_processes.traced_child"
    ]
    [process] = [
        s for s in _of(spans, ran["task_id"]) if s.name == "process it_processes.traced_child"
    ]
    [inner] = [s for s in spans if s.name == "inner work"]
    assert process.parent_span_id == dispatch.span_id
    assert inner.parent_span_id == process.span_id
    assert inner.trace_id == process.trace_id == dispatch.trace_id
    assert process.attributes["process.pid"] != 0
    [stopped] = [
        s for s in _of(spans, killed.task_id) if s.name == "process it_processes.late_write"
    ]
    [its_dispatch] = [s for s in _of(spans, killed.task_id) if s.name.startswith("dispatch")]
    assert stopped.parent_span_id == its_dispatch.span_id
    assert stopped.status_code == "ERROR"


async def test_a_drain_waits_for_running_process_tasks(cluster: Cluster) -> None:
    cluster.control_plane(local_concurrency=0)
    subworker = cluster.subworker("--task-modules", "it_processes", "--processes", "1")
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        task_id = await client.delay("slow_pid", 1.5)

        async def running() -> bool:
            result = await client.get_task_result(task_id)
            return result is not None and result.status == TaskStatus.RUNNING

        await wait_until(running, 10, "the task to run")
        children = children_of(subworker.pid)
        subworker.signal(signal.SIGTERM)
        result = await client.wait_result(task_id, timeout=20)
        assert await asyncio.to_thread(subworker.wait) == 0
    assert result.status == TaskStatus.SUCCESS
    assert result.result in children
    assert not any(alive(pid) for pid in children)


async def test_children_die_with_their_subworker(cluster: Cluster) -> None:
    cluster.control_plane(local_concurrency=0)
    subworker = cluster.subworker("--task-modules", "it_processes", "--processes", "2")
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        await client.delay("slow_pid", 30.0)  # one child busy, one idle
        children = children_of(subworker.pid)
        assert len(children) == 2
        subworker.signal(signal.SIGKILL)
        await asyncio.to_thread(subworker.wait)

        async def gone() -> bool:
            return not any(alive(pid) for pid in children)

        await wait_until(gone, 10, "the children to end")


async def test_a_child_past_max_memory_is_replaced_between_tasks(cluster: Cluster) -> None:
    cluster.control_plane(local_concurrency=0)
    cluster.subworker(
        "--task-modules", "it_processes", "--processes", "1", "--max-memory-per-child", "80"
    )
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        small = [(await client.submit_task("grow", [1], timeout=20)).result for _ in range(2)]
        big = (await client.submit_task("grow", [100], timeout=20)).result
        after = (await client.submit_task("grow", [1], timeout=20)).result
    assert small[0] == small[1] == big
    assert after != big


async def test_the_control_plane_runs_process_tasks_in_its_own_children(
    cluster: Cluster,
) -> None:
    plane = cluster.control_plane(
        "--task-modules", "it_processes", "--local-processes", "1", local_concurrency=2
    )
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        result = await client.submit_task("pid_of", timeout=20)
        assert result.status == TaskStatus.SUCCESS, result.error
    assert result.result in children_of(plane.pid)


async def test_process_tasks_past_their_limit_never_start_after_they_are_reported(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given eight 3 s process tasks with a 0.5 s limit on one slot and one child
    cluster.control_plane(local_concurrency=0)
    cluster.subworker("--task-modules", "it_processes", "--processes", "1", concurrency=1)
    starts = tmp_path / "starts"
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        ids = [await client.delay("stamp_child", str(starts), i, 3.0) for i in range(8)]
        results = await client.wait_results(ids, timeout=60)
        reported = time.time()
    # Then every one started, each before its failure was reported, and ran its 0.5 s
    began = dict(line.split() for line in starts.read_text().splitlines())
    assert sorted(began) == [str(i) for i in range(8)]
    for i, result in enumerate(results):
        assert result.error is not None
        assert result.error.reason == "timeout"
        assert result.finished_at is not None
        assert result.finished_at - float(began[str(i)]) >= 0.45
    assert all(float(t) < reported for t in began.values())
