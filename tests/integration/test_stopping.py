"""Stopping running tasks: cancellation reaches the subworker, timeouts free the slot."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

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


async def _all_running(client: Client, ids: Sequence[str]) -> bool:
    return all([await _running(client, t) for t in ids])


async def test_sync_tasks_waiting_for_a_thread_never_start_after_their_timeout_is_reported(
    one_slot: Client, tmp_path: Path
) -> None:
    # Given eight 3 s sync tasks with a 0.5 s limit on one slot: the threads abandoned by
    # the first four fill the pool (2 * 1 + 2 threads), so the others wait for a thread
    client, starts = one_slot, tmp_path / "starts"
    ids = [
        await client.apply_async("stamp", (str(starts), i, 3.0), time_limit=0.5) for i in range(8)
    ]
    # When every one of them has been reported
    results = await client.wait_results(ids, timeout=30)

    async def all_started() -> bool:
        return starts.exists() and len(starts.read_text().splitlines()) == len(ids)

    await wait_until(all_started, 15, "every task to start")
    # Then each started before its timeout was reported, and ran its 0.5 s before that
    began = dict(line.split() for line in starts.read_text().splitlines())
    for i, result in enumerate(results):
        assert result.error is not None
        assert result.error.reason == "timeout"
        assert result.finished_at is not None
        ran = result.finished_at - float(began[str(i)])
        assert ran >= 0.45, f"task {i} started {-ran:.2f} s after it was reported"


async def test_a_sync_task_cancelled_while_waiting_for_a_thread_never_starts(
    one_slot: Client, tmp_path: Path
) -> None:
    # Given four 3 s sync tasks abandoned by their 0.5 s limit, holding every pool thread
    client, starts = one_slot, tmp_path / "starts"
    stuck = [
        await client.apply_async("stamp", (str(starts), i, 3.0), time_limit=0.5) for i in range(4)
    ]
    await client.wait_results(stuck, timeout=15)
    # And a fifth one handed to the subworker, waiting for a thread
    waiting = await client.apply_async("stamp", (str(starts), 4, 3.0), time_limit=0.5)
    await wait_until(lambda: _delivered(client, waiting), what="its delivery")
    # When it is cancelled
    assert await client.cancel_task(waiting) is True
    # Then it never starts: the first thread to come free skips it and takes the next task
    follow = await client.delay("stamp", str(starts), 5, 0.0)
    assert (await client.wait_result(follow, timeout=15)).status == TaskStatus.SUCCESS
    assert sorted(line.split()[0] for line in starts.read_text().splitlines()) == [
        "0", "1", "2", "3", "5"
    ]  # fmt: skip


async def _delivered(client: Client, task_id: str) -> bool:
    result = await client.get_task_result(task_id)
    # Assigned until a thread starts it (an older subworker said running at once)
    return result is not None and result.status in (TaskStatus.ASSIGNED, TaskStatus.RUNNING)
