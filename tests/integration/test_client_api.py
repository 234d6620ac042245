"""The client SDK's API (async and sync) against a real control plane."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from harness import Cluster, free_port_block

from fastworker import (
    Client,
    ControlPlaneUnavailable,
    SyncClient,
    TaskFailed,
    TaskNotFound,
    TaskStatus,
    Timeout,
)


async def test_delay_returns_an_id_whose_result_can_be_fetched_later(client: Client) -> None:
    task_id = await client.delay("add", 2, y=5)
    result = await client.wait_result(task_id)
    assert result.result == 7
    fetched = await client.get_task_result(task_id)
    assert fetched is not None
    assert fetched.result == 7
    assert client.get_result(task_id) == fetched
    assert client.get_status(task_id) == TaskStatus.SUCCESS == "success"


async def test_resubmitting_the_same_task_id_runs_the_task_once(client: Client) -> None:
    first = await client.apply_async("nap", (0.1,), task_id="fixed-id-1")
    again = await client.apply_async("nap", (0.1,), task_id="fixed-id-1")
    result = await client.wait_result(first)
    after = await client.apply_async("nap", (0.1,), task_id="fixed-id-1")
    assert first == again == after == "fixed-id-1"
    assert result.attempts == 1
    assert len(await client.list_tasks()) == 1


async def test_wait_returns_the_value_or_raises_the_remote_error(client: Client) -> None:
    assert await client.wait(await client.delay("add", 1, 1)) == 2
    with pytest.raises(TaskFailed) as failed:
        await client.wait(await client.delay("explode", "why"))
    assert (failed.value.remote_type, failed.value.remote_message) == ("RuntimeError", "why")
    assert "Traceback" in failed.value.remote_traceback


async def test_a_result_wait_that_runs_out_raises_timeout(client: Client) -> None:
    started = time.monotonic()
    with pytest.raises(Timeout) as raised:
        await client.submit_task("nap", args=(5,), timeout=0.3)
    assert isinstance(raised.value, TimeoutError)
    assert time.monotonic() - started < 3


async def test_unknown_task_ids_read_as_none_and_fail_to_wait(client: Client) -> None:
    assert await client.get_task_result("never-submitted") is None
    assert client.get_result("never-submitted") is None
    with pytest.raises(TaskNotFound):
        await client.wait_result("never-submitted")
    with pytest.raises(TaskNotFound):
        await client.cancel_task("never-submitted")


async def test_cancelling_a_queued_task_stops_it_from_running(cluster: Cluster) -> None:
    cluster.control_plane(local_concurrency=0)
    async with cluster.client() as client:
        task_id = await client.delay("add", 1, 2)
        assert await client.cancel_task(task_id) is True
        assert await client.cancel_task(task_id) is False
        cluster.subworker()
        await cluster.workers(client, 1)
        follow = await client.submit_task("add", args=(0, 0))
        result = await client.get_task_result(task_id)
    assert follow.status == "success"
    assert result is not None
    assert result.status == TaskStatus.CANCELLED
    assert result.attempts == 0


async def test_no_control_plane_raises_a_distinct_error_within_the_timeout() -> None:
    nobody = f"tcp://127.0.0.1:{free_port_block(1)}"
    started = time.monotonic()
    with pytest.raises(ControlPlaneUnavailable, match="no control plane"):
        async with Client(nobody, timeout=0.5):
            pass
    direct = Client(address=f"tcp://127.0.0.1:{free_port_block(6)}", timeout=0.3, retries=1)
    await direct.start()
    try:
        with pytest.raises(ControlPlaneUnavailable):
            await direct.delay("add", 1, 2)
    finally:
        direct.stop()
    assert time.monotonic() - started < 5


async def test_the_sync_client_offers_the_same_calls(cluster: Cluster) -> None:
    cluster.control_plane()

    def use_sync_client() -> tuple[object, ...]:
        with SyncClient(cluster.discovery, timeout=20) as client:
            result = client.submit_task("add", args=(20, 22))
            task_id = client.delay("echo", "sync")
            ids = client.submit_batch([("add", (i, i)) for i in range(10)])
            return (
                result.result,
                client.wait(task_id),
                [client.wait(t) for t in ids],
                len(client.list_workers()),
            )

    answer, echoed, doubled, workers = await asyncio.to_thread(use_sync_client)
    assert (answer, echoed, workers) == (42, "sync", 1)
    assert doubled == [2 * i for i in range(10)]


async def test_stop_is_callable_without_await_and_twice(cluster: Cluster) -> None:
    cluster.control_plane()
    client = cluster.client()
    await client.start()
    client.stop()
    client.stop()
    await client.aclose()


async def test_a_retry_after_a_lost_reply_does_not_run_the_task_twice(cluster: Cluster) -> None:
    # Given a control plane that stops answering for a while (SIGSTOP), so the client's
    # first send times out and it sends the same submission again
    plane = cluster.control_plane()
    async with cluster.client() as ready:
        await ready.list_workers()
    async with cluster.client(timeout=0.3, retries=20) as client:
        plane.signal(signal.SIGSTOP)
        try:
            submitting = asyncio.ensure_future(client.delay("nap", 0, "once"))
            done, _ = await asyncio.wait([submitting], timeout=1.0)
            assert not done, "the stopped control plane cannot have answered"
        finally:
            plane.signal(signal.SIGCONT)
        task_id = await submitting
        result = await client.wait_result(task_id, timeout=10)
        # Then every copy that reached the control plane was recognised as the same task
        assert [t.task_id for t in await client.list_tasks()] == [task_id]
    assert result.status == TaskStatus.SUCCESS
    assert result.attempts == 1


async def test_delay_with_an_idempotency_key_twice_runs_the_task_once(
    client: Client, tmp_path: Path
) -> None:
    counter = tmp_path / "runs"

    first = await client.delay("flaky", str(counter), 1, idempotency_key="order-42")
    second = await client.delay("flaky", str(counter), 1, idempotency_key="order-42")
    result = await client.wait_result(first, timeout=20)
    third = await client.delay("flaky", str(counter), 1, idempotency_key="order-42")

    assert first == second == third  # the result is still kept: same task
    assert result.status == TaskStatus.SUCCESS
    assert counter.read_text().strip() == "1"
