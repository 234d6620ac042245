"""Logs: JSON lines when stdout is not a terminal, with the task's fields bound while it
runs, whether the task logs through structlog or the standard library."""

from __future__ import annotations

import json
import subprocess
import sys

from harness import Cluster, wait_until


def json_lines(text: str) -> list[dict[str, object]]:
    """Every line of a process's output, each of which must be a JSON object."""
    lines = [line for line in text.splitlines() if line.strip()]
    parsed = [json.loads(line) for line in lines]
    assert all(isinstance(p, dict) for p in parsed)
    return parsed


async def test_a_subworker_logs_json_lines_carrying_the_running_tasks_fields(
    cluster: Cluster,
) -> None:
    cluster.control_plane(local_concurrency=0)
    subworker = cluster.subworker()
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        [worker] = await client.list_workers()
        result = await client.submit_task("chatty", ["hi"])
        assert result.result == "hi"

        async def logged() -> bool:
            return "structlog says" in subworker.output()

        await wait_until(logged, 5, "the task's log lines")

    lines = json_lines(subworker.output())
    for line in lines:
        assert {"event", "level", "timestamp"} <= line.keys()
    said = {str(line["event"]): line for line in lines if line.get("task_id") == result.task_id}
    assert set(said) == {"stdlib says hi", "structlog says"}
    for line in said.values():
        assert line["task_name"] == "it_tasks.chatty"
        assert line["worker_id"] == worker.worker_id
        assert line["trace_id"] is None  # the client did not trace
    assert said["stdlib says hi"]["level"] == "warning"
    assert said["structlog says"]["word"] == "hi"
    # Fields are bound per task: lines logged outside a task carry none of them.
    assert all("task_id" not in line for line in lines if line not in said.values())


async def test_the_control_plane_logs_json_lines_at_the_level_asked(cluster: Cluster) -> None:
    quiet = cluster.spawn(
        "control-plane",
        "control-plane",
        "--task-modules",
        "it_tasks",
        "--log-level",
        "warning",
        "--base-port",
        str(cluster.base_port),
        "--discovery-port",
        str(cluster.discovery_port),
    )
    async with cluster.client() as client:
        await cluster.workers(client, 1)  # the embedded subworker: startup has been logged
        await client.submit_task("add", [1, 2])
    quiet.stop()

    loud = cluster.control_plane()
    async with cluster.client() as client:
        await client.submit_task("add", [1, 2])
    loud.stop()

    assert json_lines(quiet.output()) == []  # nothing at warning or above happened
    assert any(line["event"] == "control plane started" for line in json_lines(loud.output()))


def test_importing_the_sdk_configures_no_logging() -> None:
    probe = (
        "import logging, structlog, fastworker, fastworker.tracing;"
        "assert not logging.getLogger().handlers, logging.getLogger().handlers;"
        "assert not structlog.is_configured();"
        "print('clean')"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.stdout.strip() == "clean", done.stderr
