"""The client SDK's API (async and sync) against a real control plane."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from pathlib import Path

import pytest
from harness import Cluster

from fastworker import (
    Client,
    ControlPlaneUnavailable,
    FastWorkerError,
    InvalidArguments,
    MessageTooLarge,
    SyncClient,
    TaskFailed,
    TaskNotFound,
    TaskResult,
    TaskStatus,
    Timeout,
)
from fastworker.testing import free_port_block


async def test_delay_returns_an_id_whose_result_can_be_fetched_later(client: Client) -> None:
    task_id = await client.delay("add", 2, y=5)
    result = await client.wait_result(task_id)
    assert result.result == 7
    fetched = await client.get_task_result(task_id)
    assert fetched is not None
    assert fetched.result == 7
    assert client.last_seen_result(task_id) == fetched
    assert client.last_seen_status(task_id) == TaskStatus.SUCCESS == "success"  # type: ignore[comparison-overlap]


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
    assert client.last_seen_result("never-submitted") is None
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
    # (retries share one deadline: 5 s over 21 attempts is about 0.24 s each)
    async with cluster.client(timeout=5, retries=20) as client:
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


async def test_with_default_timeouts_a_dead_address_fails_within_the_connect_budget() -> None:
    # Given a client with the default timeout (30 s) and retries (3), and nothing listening
    dead = f"tcp://127.0.0.1:{free_port_block(6)}"
    started = time.monotonic()
    async with Client(address=dead) as direct:
        # When it submits (with and without waiting for the result)
        with pytest.raises(ControlPlaneUnavailable, match=dead.rsplit(":", 1)[0]):
            await direct.delay("add", 1, 2)
        with pytest.raises(ControlPlaneUnavailable, match="no control plane answered"):
            await direct.submit_task("add", args=(1, 2))
    # Then each call gave up after the 3 s connect budget, not after 120 or 240 s
    assert time.monotonic() - started < 9


async def test_with_default_timeouts_discovery_with_nobody_there_fails_within_the_budget() -> None:
    nobody = f"tcp://127.0.0.1:{free_port_block(1)}"
    started = time.monotonic()
    with pytest.raises(ControlPlaneUnavailable, match=f"announced itself at {nobody} within 3 s"):
        await Client(nobody).start()
    assert time.monotonic() - started < 5


async def test_a_held_wait_outlasts_the_timeout_and_the_connect_budget(
    cluster: Cluster, client: Client
) -> None:
    # Given a connected client whose calls have a 0.5 s deadline
    async with cluster.client(timeout=0.5, connect_timeout=0.5) as quick:
        task_id = await quick.delay("nap", 1.5, "held")
        # When it waits longer than that for a result that takes 1.5 s
        result = await quick.wait_result(task_id, timeout=10)
    # Then the held wait gets its answer
    assert result.status == TaskStatus.SUCCESS


async def test_an_oversize_submission_raises_message_too_large_a_fastworker_error(
    cluster: Cluster, client: Client
) -> None:
    async with cluster.client(max_message_size=4096) as small:
        with pytest.raises(MessageTooLarge, match="4096-byte limit") as raised:
            await small.delay("echo", "x" * 10_000)
        with pytest.raises(MessageTooLarge):
            await small.submit_task("echo", args=("x" * 10_000,))
        with pytest.raises(InvalidArguments):
            await small.delay("echo", object())
        # and the client still works
        assert await small.wait(await small.delay("echo", "fits"), timeout=10) == "fits"
    assert isinstance(raised.value, FastWorkerError)
    assert raised.value.code == "oversize"


async def test_a_sync_client_can_be_called_from_its_own_callback(
    cluster: Cluster, client: Client
) -> None:
    # Its calls go straight to NNG, not through the loop the callback runs on, so calling
    # it there answers (the 0.x client, which ran on that loop, could only refuse).
    def use_sync_client() -> tuple[list[TaskResult | None], int]:
        seen: list[TaskResult | None] = []
        called = threading.Event()
        with SyncClient(cluster.discovery, timeout=20, connect_timeout=20) as sync:

            def callback(result: TaskResult) -> None:
                try:
                    seen.append(sync.get_task_result(result.task_id))
                finally:
                    called.set()

            task_id = sync.delay_with_callback("add", callback, 1, 2)
            assert called.wait(20), "the callback never ran"
            # Then the client keeps working
            assert len(seen) == 1
            assert seen[0] is not None
            assert seen[0].task_id == task_id
            return seen, sync.submit_task("add", args=(2, 3)).result

    seen, after = await asyncio.wait_for(asyncio.to_thread(use_sync_client), 30)
    assert after == 5
    assert len(seen) == 1
    assert seen[0] is not None
    assert seen[0].status == TaskStatus.SUCCESS
    assert seen[0].result == 3


async def test_a_wait_longer_than_the_control_planes_max_wait_asks_again(
    cluster: Cluster,
) -> None:
    # Given a control plane that holds a wait for at most 1 s
    cluster.control_plane("--max-wait", "1")
    async with cluster.client(timeout=20) as client:
        # When a client waits 20 s for a task that takes 2.5 s
        task_id = await client.delay("nap", 2.5, "late")
        # Then it gets the result, not a Timeout when the control plane lets go
        assert (await client.wait(task_id, timeout=20))["tag"] == "late"
    with SyncClient(cluster.discovery, timeout=20) as sync:
        sync_id = sync.delay("nap", 2.5, "late-sync")
        assert sync.wait(sync_id, timeout=20)["tag"] == "late-sync"
