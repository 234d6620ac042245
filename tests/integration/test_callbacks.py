"""Completion callbacks: every watched task calls back exactly once, without polling."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

from harness import Cluster

from fastworker import Client, SyncClient, TaskResult, TaskStatus


async def test_two_thousand_callbacks_all_arrive_exactly_once(client: Client) -> None:
    calls: Counter[str] = Counter()
    values: dict[str, object] = {}
    everyone = asyncio.Event()

    def record(result: TaskResult) -> None:
        calls[result.task_id] += 1
        values[result.task_id] = result.result
        if len(calls) == 2000:
            everyone.set()

    ids = await asyncio.gather(
        *(client.delay_with_callback("add", record, i, 1) for i in range(2000))
    )
    await asyncio.wait_for(everyone.wait(), 60)
    assert set(calls) == set(ids)
    assert set(calls.values()) == {1}
    assert [values[t] for t in ids] == [i + 1 for i in range(2000)]


async def test_a_raising_callback_does_not_stop_the_others(client: Client) -> None:
    got: list[str] = []
    done = asyncio.Event()

    def bad(result: TaskResult) -> None:
        raise RuntimeError("callback bug")

    async def good(result: TaskResult) -> None:
        got.append(result.task_id)
        done.set()

    task_id = await client.delay("add", 1, 1)
    client.watch(task_id, bad)
    client.watch(task_id, good)
    await asyncio.wait_for(done.wait(), 10)
    assert got == [task_id]


async def test_events_yield_the_final_results_of_watched_tasks(client: Client) -> None:
    ids = [await client.delay("add", i, i) for i in range(5)]
    failing = await client.delay("explode", "boom")
    for task_id in [*ids, failing]:
        client.watch(task_id)
    seen: dict[str, TaskResult] = {}
    async for result in client.events():
        seen[result.task_id] = result
        if len(seen) == 6:
            break
    assert {seen[t].result for t in ids} == {0, 2, 4, 6, 8}
    assert seen[failing].status == TaskStatus.FAILURE


async def test_the_sync_client_calls_back_too(cluster: Cluster) -> None:
    cluster.control_plane()

    def run() -> object:
        results: list[object] = []
        done = threading.Event()

        def record(result: TaskResult) -> None:
            results.append(result.result)
            done.set()

        with SyncClient(cluster.discovery, timeout=20) as client:
            client.delay_with_callback("add", record, 20, 22)
            assert done.wait(10)
        return results[0]

    assert await asyncio.to_thread(run) == 42
