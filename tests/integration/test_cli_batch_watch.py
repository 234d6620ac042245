"""``fastworker submit --batch``, ``fastworker watch`` and the errors a newcomer meets."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from harness import Cluster, wait_until
from http_helpers import fastworker

from fastworker import Client
from fastworker.testing import free_port_block


async def submit(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return await fastworker(cluster, "submit", *args, "--discovery-address", cluster.discovery)


def jsonl(path: Path, lines: Sequence[object]) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


async def test_a_batch_file_runs_every_task_in_order_with_a_summary(
    cluster: Cluster, client: Client, tmp_path: Path
) -> None:
    tasks = [{"task_name": "add", "args": [i, 1]} for i in range(2_500)]
    tasks[7] = {"task_name": "add", "args": [1, 1], "priority": "critical"}
    source = jsonl(tmp_path / "tasks.jsonl", tasks)
    done = await fastworker(
        cluster, "submit", "--batch", source, "--discovery-address", cluster.discovery
    )
    assert done.returncode == 0, done.stderr
    values = [json.loads(line) for line in done.stdout.splitlines()]
    assert values == [2 if i == 7 else i + 1 for i in range(2_500)]
    assert f"submitted 2,500 tasks from {source}" in done.stderr
    assert "finished: 2,500 success" in done.stderr


async def test_a_non_blocking_batch_prints_task_ids(
    cluster: Cluster, client: Client, tmp_path: Path
) -> None:
    source = jsonl(tmp_path / "tasks.jsonl", [{"task_name": "add", "args": [1, 2]}] * 3)
    done = await fastworker(
        cluster,
        "submit",
        "--batch",
        source,
        "--non-blocking",
        "--discovery-address",
        cluster.discovery,
    )
    ids = done.stdout.split()
    assert done.returncode == 0
    assert len(ids) == 3
    results = await client.wait_results(ids, timeout=20)
    assert [r.result for r in results] == [3, 3, 3]


async def test_a_bad_batch_line_is_named_before_anything_is_sent(
    cluster: Cluster, client: Client, tmp_path: Path
) -> None:
    source = tmp_path / "tasks.jsonl"
    source.write_text('{"task_name": "add", "args": [1, 2]}\n\n{"task_nam": "add"}\n')
    done = await fastworker(
        cluster, "submit", "--batch", str(source), "--discovery-address", cluster.discovery
    )
    assert done.returncode == 2
    assert f"{source}:3: Object contains unknown field `task_nam`" in done.stderr
    assert await client.list_tasks(None, 10) == []


async def test_a_refused_batch_says_which_tasks_and_what_went_through(
    cluster: Cluster, client: Client, tmp_path: Path
) -> None:
    tasks = [{"task_name": "add", "args": [1, 2]}] * 1_000 + [{"task_name": "nope"}]
    source = jsonl(tmp_path / "tasks.jsonl", tasks)
    done = await fastworker(
        cluster, "submit", "--batch", source, "--discovery-address", cluster.discovery
    )
    assert done.returncode == 2
    assert "one of tasks 1,001-1,001 (in file order) was refused" in done.stderr
    assert "unknown_task" in done.stderr
    assert "the 1,000 before them were" in done.stderr


async def test_watch_follows_a_task_until_it_is_final(cluster: Cluster, client: Client) -> None:
    task_id = await client.delay("nap", 0.5)
    done = await fastworker(cluster, "watch", "--http-url", cluster.http, "--task-id", task_id)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "success" in lines[-1]
    assert task_id in lines[-1]


async def test_watch_streams_every_transition_as_json_lines(
    cluster: Cluster, client: Client
) -> None:
    watcher = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "fastworker.cli",
        "watch",
        "--http-url",
        cluster.http,
        "--name",
        "add",
        "--json",
        stdout=subprocess.PIPE,
        env=cluster.env(),
    )
    assert watcher.stdout is not None
    stdout = watcher.stdout
    seen: list[dict[str, object]] = []

    async def read_until_a_success() -> None:
        async for line in stdout:
            seen.append(json.loads(line))
            if seen[-1]["kind"] == "task.success":
                return

    reading = asyncio.ensure_future(read_until_a_success())
    try:
        # Tasks until one shows up: the watcher may not be connected for the first ones
        async def shown() -> bool:
            if not reading.done():
                await client.submit_task("add", (1, 2))
            return reading.done()

        await wait_until(shown, 30, "watch to show a task's success")
    finally:
        reading.cancel()
        watcher.send_signal(signal.SIGINT)
        # read what it still prints until it exits: a full pipe would block it
        await asyncio.wait_for(stdout.read(), 20)
        await asyncio.wait_for(watcher.wait(), 20)
    assert {e["name"] for e in seen} == {"it_tasks.add"}  # --name add: its full name
    assert watcher.returncode == 0


async def test_nothing_listening_gets_a_hint_to_start_one(cluster: Cluster) -> None:
    nowhere = f"tcp://127.0.0.1:{free_port_block(1)}"
    done = await fastworker(cluster, "workers", "--discovery-address", nowhere, "--timeout", "1")
    assert done.returncode == 2
    assert f"no control plane announced itself at {nowhere} within 1 s" in done.stderr
    assert "fastworker dev --task-modules" in done.stderr
    assert "Traceback" not in done.stderr
    http = f"http://127.0.0.1:{free_port_block(1)}"
    done = await fastworker(cluster, "watch", "--http-url", http)
    assert done.returncode == 2
    assert f"nothing answered at {http}/api/events" in done.stderr
