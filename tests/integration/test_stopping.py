"""Stopping running tasks: cancellation reaches the subworker, timeouts free the slot."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from harness import Cluster, wait_until

from fastworker import Client, TaskStatus


@pytest.fixture
async def one_slot(cluster: Cluster) -> AsyncIterator[Client]:
    """A client of a control plane whose only worker is a subworker with one slot."""
    cluster.control_plane(local_concurrency=0)
    cluster.subworker(concurrency=1)
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        yield client


async def _running(client: Client, task_id: str) -> bool:
    result = await client.get_task_result(task_id)
    return result is not None and result.status == TaskStatus.RUNNING


async def test_a_running_async_task_is_cancelled_and_its_slot_takes_new_work_at_once(
    one_slot: Client,
) -> None:
    # Given a subworker with one slot, busy with a long async task
    client = one_slot
    long_id = await client.delay("nap", 60)
    await wait_until(lambda: _running(client, long_id), what="the long task to run")
    # When it is cancelled
    started = time.monotonic()
    assert await client.cancel_task(long_id) is True
    # Then the slot is free for the next task straight away
    follow = await client.submit_task("add", args=(1, 1), timeout=10)
    assert follow.result == 2
    assert time.monotonic() - started < 3
    cancelled = await client.get_task_result(long_id)
    assert cancelled is not None
    assert cancelled.status == TaskStatus.CANCELLED


async def test_an_async_task_over_its_timeout_fails_with_reason_timeout(
    one_slot: Client,
) -> None:
    client = one_slot
    started = time.monotonic()
    result = await client.submit_task("overrun", args=(60,), timeout=10)
    assert time.monotonic() - started < 5
    follow = await client.submit_task("add", args=(2, 2), timeout=10)
    assert result.status == TaskStatus.FAILURE
    assert result.error is not None
    assert result.error.reason == "timeout"
    assert follow.result == 4


async def test_a_sync_task_over_its_time_limit_is_abandoned_and_its_slot_freed(
    one_slot: Client,
) -> None:
    client = one_slot
    blocked = await client.apply_async("block", (5,), time_limit=0.3)
    result = await client.wait_result(blocked, timeout=10)
    follow = await client.submit_task("add", args=(3, 3), timeout=4)
    assert result.status == TaskStatus.FAILURE
    assert result.error is not None
    assert result.error.reason == "timeout"
    assert follow.result == 6


async def test_cancelling_a_finished_task_says_so_and_changes_nothing(client: Client) -> None:
    done = await client.submit_task("add", args=(1, 2))
    assert await client.cancel_task(done.task_id) is False
    again = await client.get_task_result(done.task_id)
    assert again is not None
    assert (again.status, again.result) == (TaskStatus.SUCCESS, 3)


async def test_many_running_tasks_cancelled_at_once_all_end_cancelled(cluster: Cluster) -> None:
    cluster.control_plane(local_concurrency=0)
    cluster.subworker(concurrency=8)
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        ids = [await client.delay("nap", 60, i) for i in range(8)]
        await wait_until(lambda: _all_running(client, ids), what="all eight to run")
        changed = await asyncio.gather(*(client.cancel_task(t) for t in ids))
        follow = await client.submit_task("add", args=(4, 4), timeout=10)
        results = await client.wait_results(ids, timeout=5)
    assert changed == [True] * 8
    assert {r.status for r in results} == {TaskStatus.CANCELLED}
    assert follow.result == 8


async def _all_running(client: Client, ids: list[str]) -> bool:
    return all([await _running(client, t) for t in ids])
