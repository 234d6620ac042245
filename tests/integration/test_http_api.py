"""The HTTP port of a real control plane (docs/http-api.md): the JSON API, the event stream
and the dashboard files. Health and ``--check`` are in test_health.py."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import re
import socket
import struct
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from harness import Cluster, wait_until
from http_helpers import get_json, wait_for_status

from fastworker import Client, TaskStatus, __version__
from fastworker_control_plane.dashboard.routes import STATIC as DASHBOARD_FILES

pytestmark = pytest.mark.integration

DOCS = Path(__file__).resolve().parents[2] / "docs"

SUMMARY_KEYS = {
    "task_id",
    "name",
    "status",
    "priority",
    "attempts",
    "worker_id",
    "submitted_at",
    "started_at",
    "finished_at",
    "duration",
    "error",
}
DETAIL_KEYS = SUMMARY_KEYS | {
    "arguments_kept",
    "args",
    "kwargs",
    "result",
    "attempt_errors",
    "eta",
    "trace_id",
    "retry_of",
}
WORKER_KEYS = {
    "worker_id",
    "name",
    "state",
    "in_flight",
    "concurrency",
    "completed",
    "tasks",
    "last_seen_ago",
    "last_heartbeat",
    "local",
    "queues",
}


def _it_task_names() -> list[str]:
    """The names of it_tasks.py's @task functions, sorted (read, not imported: importing
    would register them in this process too)."""
    tree = ast.parse((Path(__file__).parent / "it_tasks.py").read_text())
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(target, ast.Name) and target.id == "task":
                    names.append(f"it_tasks.{node.name}")  # module-qualified by default
    return sorted(names)


IT_TASKS = _it_task_names()
STREAM_TIMEOUT = 10.0


async def _finished(client: Client, *calls: tuple[str, tuple[Any, ...]]) -> list[str]:
    """Run tasks one after the other (so they finish in order); returns their ids."""
    task_ids: list[str] = []
    for name, args in calls:
        task_id = await client.delay(name, *args)
        await client.wait_result(task_id, timeout=20)
        task_ids.append(task_id)
    return task_ids


# --- JSON API ---------------------------------------------------------------------------------


async def test_the_overview_totals_the_tasks_run_so_far(
    api: str, client: Client, http: aiohttp.ClientSession
) -> None:
    await _finished(client, ("add", (1, 2)), ("add", (3, 4)), ("add", (5, 6)), ("explode", ("x",)))

    status, overview = await get_json(http, f"{api}/api/overview")

    assert status == 200
    assert set(overview) == {
        "instance_id",
        "version",
        "started_at",
        "queues",
        "scheduled",
        "in_flight",
        "workers",
        "totals",
        "results",
        "events",
    }
    assert re.fullmatch(r"[0-9a-f]{32}", overview["instance_id"])
    assert overview["version"] == __version__
    assert overview["started_at"] <= time.time()
    assert overview["queues"] == {"critical": 0, "high": 0, "normal": 0, "low": 0}
    assert (overview["scheduled"], overview["in_flight"], overview["workers"]) == (0, 0, 1)
    assert overview["totals"] == {
        "submitted": 4,
        "started": 4,
        "succeeded": 3,
        "failed": 1,
        "retried": 0,
        "cancelled": 0,
    }
    assert overview["results"]["size"] == 4
    assert overview["results"]["bytes"] > 0
    assert set(overview["results"]) == {"size", "bytes", "hits", "misses", "evictions"}
    assert set(overview["events"]) == {"published", "dropped"}


async def test_the_workers_list_shows_each_subworker_with_its_last_heartbeat(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    cluster.control_plane()
    cluster.subworker("--name", "it-worker", concurrency=2)
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        await wait_for_status(http, f"{cluster.http}/readyz", 200)

        status, workers = await get_json(http, f"{cluster.http}/api/workers")

    now = time.time()
    assert status == 200
    assert all(set(w) == WORKER_KEYS for w in workers), workers
    local = [w for w in workers if w["local"]]
    remote = [w for w in workers if not w["local"]]
    assert len(local) == len(remote) == 1
    assert local[0]["worker_id"].startswith("local-")
    assert local[0]["concurrency"] == 4
    assert (remote[0]["name"], remote[0]["concurrency"]) == ("it-worker", 2)
    for worker in workers:
        assert worker["state"] == "running"
        assert worker["tasks"] == IT_TASKS
        assert worker["last_seen_ago"] >= 0
        assert now - 30 < worker["last_heartbeat"] <= now


async def test_the_task_list_is_newest_first_and_filters_by_status(
    api: str, client: Client, http: aiohttp.ClientSession
) -> None:
    # Given finished tasks, oldest first, and one still waiting for its time
    done = await _finished(
        client,
        ("add", (0, 0)),
        ("explode", ("first",)),
        ("add", (1, 1)),
        ("explode", ("second",)),
        ("add", (2, 2)),
    )
    waiting = await client.delay("add", 9, 9, countdown=600)

    # Then the list has the live task first, then the finished ones newest first
    status, tasks = await get_json(http, f"{api}/api/tasks")
    assert status == 200
    assert [t["task_id"] for t in tasks] == [waiting, *reversed(done)]
    assert all(set(t) == SUMMARY_KEYS for t in tasks)
    assert tasks[0]["status"] == "scheduled"
    assert [t["status"] for t in tasks[1:]] == [
        "success",
        "failure",
        "success",
        "failure",
        "success",
    ]
    finished_at = [t["finished_at"] for t in tasks[1:]]
    assert finished_at == sorted(finished_at, reverse=True)

    # And a status filter keeps only those tasks, still newest first
    _, failures = await get_json(http, f"{api}/api/tasks?status=failure")
    assert [t["task_id"] for t in failures] == [done[3], done[1]]
    assert failures[0]["error"] == {
        "type": "RuntimeError",
        "message": "second",
        "reason": "exception",
    }
    _, newest = await get_json(http, f"{api}/api/tasks?status=success&limit=1")
    assert [t["task_id"] for t in newest] == [done[4]]
    _, two = await get_json(http, f"{api}/api/tasks?limit=2")
    assert [t["task_id"] for t in two] == [waiting, done[4]]
    assert await client.cancel_task(waiting)


BAD_QUERIES = [
    "/api/tasks?limit=0",
    "/api/tasks?limit=1001",
    "/api/tasks?limit=abc",
    "/api/tasks?status=bogus",
    "/api/tasks?status=SUCCESS",
    "/api/throughput?window=0",
    "/api/throughput?window=601",
    "/api/throughput?window=1.5",
]


async def test_a_bad_query_value_is_a_400_bad_request(
    api: str, http: aiohttp.ClientSession
) -> None:
    for query in BAD_QUERIES:
        status, body = await get_json(http, f"{api}{query}")
        assert status == 400, query
        assert set(body) == {"error", "message"}, query
        assert body["error"] == "bad_request", query
        assert body["message"], query


async def test_a_failed_task_shows_its_traceback_and_attempt_info(
    api: str, client: Client, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    exploded, exhausted = await _finished(
        client, ("explode", ("kaboom",)), ("flaky", (str(tmp_path / "count"), 99))
    )

    status, task = await get_json(http, f"{api}/api/tasks/{exploded}")
    assert status == 200
    assert set(task) == DETAIL_KEYS
    expected = (exploded, "it_tasks.explode", "failure")
    assert (task["task_id"], task["name"], task["status"]) == expected
    assert (task["attempts"], task["arguments_kept"], task["args"], task["result"]) == (
        1,
        False,
        None,
        None,
    )
    assert task["error"]["type"] == "RuntimeError"
    assert task["error"]["message"] == "kaboom"
    assert task["error"]["reason"] == "exception"
    assert "raise RuntimeError(message)" in task["error"]["traceback"]
    assert (task["eta"], task["trace_id"]) == (None, None)

    # A task retried until it ran out of retries lists the error of every attempt
    _, task = await get_json(http, f"{api}/api/tasks/{exhausted}")
    assert (task["status"], task["attempts"]) == ("failure", 4)
    assert "after 4 attempts" in task["error"]["message"]
    assert [e["message"] for e in task["attempt_errors"]] == [
        f"failure number {n}" for n in (1, 2, 3, 4)
    ]
    assert all("raise RuntimeError" in e["traceback"] for e in task["attempt_errors"])


async def test_a_finished_task_shows_its_result_and_says_its_arguments_were_not_kept(
    api: str, client: Client, http: aiohttp.ClientSession
) -> None:
    (napped,) = await _finished(client, ("nap", (0.05, "tagged")))

    status, task = await get_json(http, f"{api}/api/tasks/{napped}")

    assert status == 200
    assert set(task) == DETAIL_KEYS
    assert (task["status"], task["priority"], task["attempts"]) == ("success", "normal", 1)
    assert (task["arguments_kept"], task["args"], task["kwargs"]) == (False, None, None)
    assert task["result"]["tag"] == "tagged"
    assert isinstance(task["result"]["pid"], int)
    assert (task["error"], task["attempt_errors"]) == (None, [])
    assert task["worker_id"].startswith("local-")
    assert task["submitted_at"] <= task["started_at"] <= task["finished_at"]
    assert task["duration"] == pytest.approx(task["finished_at"] - task["started_at"])
    assert task["duration"] >= 0.04


async def test_an_unknown_task_id_is_a_404_task_not_found(
    api: str, http: aiohttp.ClientSession
) -> None:
    status, body = await get_json(http, f"{api}/api/tasks/{'0' * 32}")
    assert status == 404
    assert body["error"] == "task_not_found"
    assert "0" * 32 in body["message"]


async def test_a_task_whose_values_have_keys_json_lacks_still_shows_in_full(
    api: str, client: Client, http: aiohttp.ClientSession
) -> None:
    # msgpack carries these keys, so the task runs and its result comes back
    value = {None: "none", True: "bool", (1, 2): "tuple"}
    result = await client.submit_task("echo", args=(value,))
    assert (result.status, result.result) == (TaskStatus.SUCCESS, value)

    async with http.get(f"{api}/api/tasks/{result.task_id}") as response:
        assert response.status == 200, await response.text()
        task = await response.json()
    assert (task["task_id"], task["status"]) == (result.task_id, "success")
    expected = {"None": "none", "True": "bool", "(1, 2)": "tuple"}  # keys as their repr
    assert task["result"] == expected


async def test_a_control_plane_told_to_keep_arguments_shows_a_finished_tasks_arguments(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    # Given a control plane started with --result-keep-arguments
    cluster.control_plane("--result-keep-arguments")
    async with cluster.client() as client:
        await wait_for_status(http, f"{cluster.http}/readyz", 200)
        value = {None: "none", True: "bool", (1, 2): "tuple"}

        # When tasks finish
        (napped, echoed) = await _finished(client, ("nap", (0.05, "tagged")), ("echo", (value,)))

        # Then their arguments are still shown (keys JSON lacks as their repr)
        _, task = await get_json(http, f"{cluster.http}/api/tasks/{napped}")
        assert (task["status"], task["arguments_kept"]) == ("success", True)
        assert (task["args"], task["kwargs"]) == ([0.05, "tagged"], {})
        _, task = await get_json(http, f"{cluster.http}/api/tasks/{echoed}")
        assert task["args"] == [{"None": "none", "True": "bool", "(1, 2)": "tuple"}]


async def test_registered_lists_every_task_name_with_its_parameters_and_policy(
    api: str, http: aiohttp.ClientSession
) -> None:
    status, registered = await get_json(http, f"{api}/api/registered")

    assert status == 200
    assert [t["name"] for t in registered] == IT_TASKS
    by_name = {t["name"].removeprefix("it_tasks."): t for t in registered}  # checked above
    assert set(by_name["add"]) == {
        "name",
        "params",
        "max_retries",
        "retry_backoff",
        "retry_backoff_max",
        "retry_on",
        "timeout",
        "repeat_interval",
        "cron",
        "cron_tz",
        "queue",
        "rate_limit",
        "concurrency_limit",
        "concurrency_key",
        "priority",
        "result_ttl",
    }
    assert by_name["add"]["params"] == [
        {"name": "x", "kind": "POSITIONAL_OR_KEYWORD", "has_default": False},
        {"name": "y", "kind": "POSITIONAL_OR_KEYWORD", "has_default": False},
    ]
    assert [p["has_default"] for p in by_name["nap"]["params"]] == [False, True]
    assert (by_name["add"]["max_retries"], by_name["add"]["timeout"]) == (0, None)
    assert (by_name["flaky"]["max_retries"], by_name["flaky"]["retry_backoff"]) == (3, 0.05)
    assert by_name["picky"]["retry_on"] == ["KeyError"]
    assert by_name["overrun"]["timeout"] == 0.3
    assert await get_json(http, f"{api}/api/schedules") == (200, [])


async def test_throughput_counts_the_tasks_finished_in_the_window(
    api: str, client: Client, http: aiohttp.ClientSession
) -> None:
    task_ids = [await client.delay("add", i, i) for i in range(5)]
    task_ids.append(await client.delay("explode", "counted"))
    await client.wait_results(task_ids, timeout=20)

    status, throughput = await get_json(http, f"{api}/api/throughput?window=60")

    assert status == 200
    assert throughput["interval"] == 1.0
    points = throughput["points"]
    assert len(points) == 60
    seconds = [p["t"] for p in points]
    assert seconds == list(range(seconds[0], seconds[0] + 60))
    assert abs(seconds[-1] - time.time()) < 2
    assert sum(p["succeeded"] for p in points) == 5
    assert sum(p["failed"] for p in points) == 1
    _, default = await get_json(http, f"{api}/api/throughput")
    assert len(default["points"]) == 300


# --- the event stream --------------------------------------------------------------------------


async def _sse_events(response: aiohttp.ClientResponse) -> AsyncGenerator[tuple[str, Any], None]:
    """(event, parsed data) for each event of a Server-Sent Events response."""
    event = "message"
    data: list[str] = []
    while line := await response.content.readline():
        text = line.decode().rstrip("\r\n")
        if not text:
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif text.startswith("event:"):
            event = text.removeprefix("event:").strip()
        elif text.startswith("data:"):
            data.append(text.removeprefix("data:").lstrip())


async def test_the_event_stream_sends_snapshots_and_the_transitions_of_new_tasks(
    api: str, client: Client, http: aiohttp.ClientSession
) -> None:
    async with (
        asyncio.timeout(STREAM_TIMEOUT),
        contextlib.AsyncExitStack() as stack,
        http.get(f"{api}/api/events") as response,
    ):
        assert response.status == 200
        assert response.content_type == "text/event-stream"
        events = await stack.enter_async_context(contextlib.aclosing(_sse_events(response)))

        # A snapshot comes at once
        started = time.monotonic()
        kind, snapshot = await anext(events)
        assert kind == "snapshot"
        assert time.monotonic() - started < 2
        assert set(snapshot) == {"overview", "workers", "throughput"}
        assert snapshot["overview"]["workers"] == 1
        assert [w["local"] for w in snapshot["workers"]] == [True]
        points = snapshot["throughput"]  # the last 5 seconds, as in /api/throughput
        assert len(points) == 5
        assert all(set(p) == {"t", "succeeded", "failed"} for p in points)
        assert [p["t"] for p in points] == list(range(points[0]["t"], points[0]["t"] + 5))

        # When a task is submitted after the stream began
        task_id = await client.delay("add", 20, 22)

        # Then its transitions arrive, ending with its success, and a later snapshot counts it
        seen: list[dict[str, Any]] = []
        async for kind, data in events:
            if kind == "tasks":
                seen.extend(e for e in data if e["task_id"] == task_id)
            if seen and seen[-1]["kind"] == "task.success":
                break
        kinds = [e["kind"] for e in seen]
        assert kinds[-1] == "task.success"
        assert kinds.count("task.success") == 1
        assert "task.running" in kinds
        assert all(
            set(e) == {"kind", "task_id", "name", "worker_id", "attempts", "at"} for e in seen
        )
        assert seen[-1]["name"] == "it_tasks.add"
        assert seen[-1]["worker_id"].startswith("local-")
        assert seen[-1]["attempts"] == 1
        at = [e["at"] for e in seen]
        assert at == sorted(at)
        async for kind, data in events:
            if kind == "snapshot":
                assert data["overview"]["totals"]["succeeded"] == 1
                assert sum(p["succeeded"] for p in data["throughput"]) == 1
                break
    assert await client.wait(task_id) == 42


async def _abandon_event_stream(port: int) -> None:
    """Open the event stream, read its first snapshot, then reset the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await writer.drain()
        await reader.readuntil(b"event: snapshot")
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        writer.transport.abort()  # with SO_LINGER 0: a reset, not a goodbye
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def test_the_control_plane_keeps_serving_after_a_stream_client_vanishes(
    api: str, client: Client, cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    # Given event-stream clients that reset their connections mid-stream
    async with asyncio.timeout(STREAM_TIMEOUT):
        for _ in range(3):
            await _abandon_event_stream(cluster.http_port)

    # Then tasks still run for NNG clients, and HTTP still answers
    results = await asyncio.gather(*(client.submit_task("add", args=(i, 1)) for i in range(20)))
    assert [r.result for r in results] == [i + 1 for i in range(20)]
    assert all(r.status == TaskStatus.SUCCESS for r in results)
    assert await get_json(http, f"{api}/readyz") == (200, {"status": "ready"})
    _, overview = await get_json(http, f"{api}/api/overview")
    assert overview["totals"]["succeeded"] == 20

    # And the vanished streams were unsubscribed: new tasks publish no events any more
    async def no_subscriber_left() -> bool:
        _, before = await get_json(http, f"{api}/api/overview")
        await client.submit_task("add", args=(0, 0))
        _, after = await get_json(http, f"{api}/api/overview")
        return bool(after["events"]["published"] == before["events"]["published"])

    await wait_until(no_subscriber_left, 10, "the vanished streams to be unsubscribed")

    # And a new stream still gets its snapshot
    async with (
        asyncio.timeout(STREAM_TIMEOUT),
        http.get(f"{api}/api/events") as response,
        contextlib.aclosing(_sse_events(response)) as events,
    ):
        kind, _ = await anext(events)
        assert kind == "snapshot"
    output = next(p for p in cluster.procs if p.name == "control-plane").output()
    assert "Traceback" not in output


# --- the dashboard -----------------------------------------------------------------------------


async def test_the_dashboard_page_and_its_script_are_served(
    api: str, http: aiohttp.ClientSession
) -> None:
    async with http.get(f"{api}/") as page:
        assert page.status == 200
        if not (DASHBOARD_FILES / "app.js").exists():
            return  # the dashboard is still being written: only its route is checked
        assert page.content_type == "text/html"
        html = await page.text()
    assert "/static/app.js" in html
    async with http.get(f"{api}/static/app.js") as script:
        assert script.status == 200
        assert script.content_type in {"application/javascript", "text/javascript"}
        assert (await script.read()).strip()
    async with http.get(f"{api}/static/no-such-file.js") as missing:
        assert missing.status == 404


async def test_the_documented_queue_and_limit_examples_print_what_the_docs_show(
    cluster: Cluster,
) -> None:
    # Given a control plane requiring a token, with three tasks queued in "reports" (which
    # no worker serves), as docs/http-api.md's examples assume
    token = "http-api-docs-token"
    cluster.control_plane(env=cluster.env(FASTWORKER_AUTH_TOKEN=token))
    async with cluster.client(auth_token=token) as client:
        await cluster.workers(client, 1)
        for n in range(3):
            await client.delay("echo", n, queue="reports")
    # When each `curl` example of its "Queues and limits" section runs (on this test's port)
    examples = _console_examples(_section(DOCS / "http-api.md", "Queues and limits"))
    assert len(examples) == 2
    for command, shown in examples:
        command = command.replace("http://127.0.0.1:8080", cluster.http)
        done = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            stdout=asyncio.subprocess.PIPE,
            env=cluster.env(FASTWORKER_AUTH_TOKEN=token),
        )
        out, _ = await asyncio.wait_for(done.communicate(), 30)
        # Then it prints what the docs show
        assert json.loads(out) == json.loads(shown), command


def _section(path: Path, title: str) -> str:
    text = path.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _console_examples(text: str) -> list[tuple[str, str]]:
    """Each ```console block: its ``$`` command (continuation lines joined) and output."""
    examples = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.DOTALL):
        command, _, shown = block.removeprefix("$ ").partition("\n")
        while command.endswith("\\"):
            more, _, shown = shown.partition("\n")
            command = command[:-1] + more
        examples.append((command, shown.strip()))
    return examples
