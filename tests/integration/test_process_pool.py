"""Process tasks: run in child processes of a subworker, stopped for real at their limits
and on cancel, their crashes survived, their children recycled."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from harness import Cluster, wait_until
from procfs import alive

from fastworker import Client, TaskStatus


def _process_worker(cluster: Cluster, *extra: str, concurrency: int = 2) -> None:
    cluster.subworker("--task-modules", "it_processes", *extra, concurrency=concurrency)


@pytest.fixture
async def pool_of_one(cluster: Cluster) -> AsyncIterator[Client]:
    """A control plane that runs nothing itself and one subworker: 2 slots, 1 child."""
    cluster.control_plane(local_concurrency=0)
    _process_worker(cluster, "--processes", "1")
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        yield client


async def _running(client: Client, task_id: str) -> bool:
    result = await client.get_task_result(task_id)
    return result is not None and result.status == TaskStatus.RUNNING


async def test_a_process_task_runs_in_a_child_not_in_the_subworker(
    pool_of_one: Client,
) -> None:
    client = pool_of_one
    in_child = await client.submit_task("pid_of", timeout=20)
    on_thread = await client.submit_task("thread_pid", timeout=20)
    assert in_child.status == TaskStatus.SUCCESS, in_child.error
    assert isinstance(in_child.result, int)
    assert in_child.result != on_thread.result


async def test_the_hard_limit_kills_the_child_frees_the_slot_and_the_next_runs_fresh(
    pool_of_one: Client, tmp_path: Path
) -> None:
    client = pool_of_one
    before = (await client.submit_task("pid_of", timeout=20)).result
    target = tmp_path / "late"
    # Given a task that writes its file 3 s in, past its 1 s limit
    started = time.monotonic()
    result = await client.submit_task("late_write", args=(str(target), 3.0), timeout=20)
    # Then it is reported timed out at its limit
    assert result.status == TaskStatus.FAILURE
    assert result.error is not None
    assert result.error.reason == "timeout"
    assert time.monotonic() - started < 2.5
    # And the next task runs at once, in a fresh child
    after = (await client.submit_task("pid_of", timeout=20)).result
    assert after != before
    # And the side effect never happens: its child is gone before it could write
    assert isinstance(before, int)

    async def killed() -> bool:
        return not alive(before)

    await wait_until(killed, 5, "the timed-out task's child to be gone")
    assert not target.exists(), "the killed task wrote its file"


async def test_the_soft_limit_raises_inside_the_task_which_cleans_up(
    pool_of_one: Client, tmp_path: Path
) -> None:
    client = pool_of_one
    target = tmp_path / "tidy"
    result = await client.submit_task("tidy", args=(str(target),), timeout=20)
    assert result.status == TaskStatus.SUCCESS, result.error
    assert result.result == "cleaned up"
    assert target.read_text() == "cleaned up"


async def test_cancelling_a_running_process_task_terminates_it(
    pool_of_one: Client, tmp_path: Path
) -> None:
    client = pool_of_one
    target, marker = tmp_path / "cancelled", tmp_path / "cancelled.started"
    task_id = await client.delay("write_after", str(target), 3.0)

    async def started() -> bool:
        return marker.exists()

    await wait_until(started, what="the task to start in its child")
    assert await client.cancel_task(task_id) is True
    result = await client.wait_result(task_id, timeout=10)
    assert result.status == TaskStatus.CANCELLED
    # The slot and the child's place are free again
    follow = await client.submit_task("pid_of", timeout=20)
    assert follow.status == TaskStatus.SUCCESS
    [pid] = marker.read_text().split()
    assert int(pid) != follow.result

    async def terminated() -> bool:
        return not alive(int(pid))

    await wait_until(terminated, 5, "the cancelled task's child to be gone")
    assert not target.exists(), "the cancelled task wrote its file"


@pytest.mark.parametrize("how", ["exit", "segv"])
async def test_a_child_dying_under_a_task_gives_worker_crashed_then_the_retry_runs(
    pool_of_one: Client, tmp_path: Path, how: str
) -> None:
    client = pool_of_one
    result = await client.submit_task(
        "crash_once", args=(str(tmp_path / "marker"), how), timeout=30
    )
    assert result.status == TaskStatus.SUCCESS, result.error
    assert result.result == "survived"
    assert result.attempts == 2
    [worker] = await client.list_workers()
    assert worker.state == "running"


async def test_a_task_that_always_kills_its_child_fails_with_worker_crashed(
    pool_of_one: Client,
) -> None:
    client = pool_of_one
    result = await client.submit_task("always_crash", timeout=60)
    assert result.status == TaskStatus.FAILURE
    assert result.error is not None
    assert result.error.reason == "worker_crashed"
    follow = await client.submit_task("pid_of", timeout=20)
    assert follow.status == TaskStatus.SUCCESS


async def test_an_unportable_result_from_a_child_is_a_clear_failure(pool_of_one: Client) -> None:
    result = await pool_of_one.submit_task("unportable", timeout=20)
    assert result.status == TaskStatus.FAILURE
    assert result.error is not None
    assert result.error.reason == "unserializable_result"
    assert "set" in result.error.message


async def test_children_are_recycled_after_max_tasks_per_child(cluster: Cluster) -> None:
    cluster.control_plane(local_concurrency=0)
    _process_worker(cluster, "--processes", "1", "--max-tasks-per-child", "3")
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        pids = [
            (await client.submit_task("pid_of", args=(i,), timeout=20)).result for i in range(10)
        ]
    assert len(set(pids)) >= 4, pids


async def test_a_child_ignoring_sigterm_is_killed_after_the_grace(
    pool_of_one: Client, tmp_path: Path
) -> None:
    client = pool_of_one
    target, pid_file = tmp_path / "stubborn", tmp_path / "stubborn.pid"
    result = await client.submit_task("stubborn", args=(str(target),), timeout=20)
    assert result.error is not None
    assert result.error.reason == "timeout"
    pid = int(pid_file.read_text())

    async def killed() -> bool:
        return not alive(pid)

    await wait_until(killed, 5, "SIGKILL after the 2 s grace")
    assert not target.exists()


async def test_what_a_process_task_started_ends_with_it(
    pool_of_one: Client, tmp_path: Path
) -> None:
    client = pool_of_one
    noted = tmp_path / "grandchild"
    result = await client.submit_task("with_grandchild", args=(str(noted),), timeout=20)
    assert result.error is not None
    assert result.error.reason == "timeout"
    grandchild = int(noted.read_text())

    async def ended() -> bool:
        return not alive(grandchild)

    await wait_until(ended, 5, "the task's own subprocess to end")


async def test_a_task_holding_the_gil_is_still_cancelled(
    pool_of_one: Client, tmp_path: Path
) -> None:
    # Given a task computing in C, its child too busy to answer a cancel
    client = pool_of_one
    started = tmp_path / "started"
    task_id = await client.delay("hold_the_gil", str(started))

    async def running() -> bool:
        return started.exists()

    await wait_until(running, 10, "the task to start")
    # When it is cancelled, its child is terminated all the same
    assert await client.cancel_task(task_id) is True
    follow = await client.submit_task("pid_of", timeout=20)
    assert follow.status == TaskStatus.SUCCESS
    cancelled = await client.get_task_result(task_id)
    assert cancelled is not None
    assert cancelled.status == TaskStatus.CANCELLED


async def test_a_process_task_asking_for_a_retry_is_tried_again(pool_of_one: Client) -> None:
    result = await (await pool_of_one.delay("asks_again_in_child")).result(timeout=30)
    assert (result.status, result.result, result.attempts) == (TaskStatus.SUCCESS, 3, 3)
    assert [e.message for e in result.attempt_errors] == [
        "attempt 1 asks again",
        "attempt 2 asks again",
    ]
