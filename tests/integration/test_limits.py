"""Size limits and shutdown: every request still gets an answer, and no task is stranded."""

from __future__ import annotations

import asyncio
import signal

import pytest
from harness import Cluster, wait_until

from fastworker import RequestRejected, TaskStatus


async def test_tasks_too_big_to_share_one_assignment_are_spread_over_several(
    cluster: Cluster,
) -> None:
    # Given a small message limit, and tasks that each take a third of it
    cluster.control_plane("--max-message-size", "4096", local_concurrency=0)
    cluster.subworker("--max-message-size", "4096", concurrency=8)
    async with cluster.client(max_message_size=4096) as client:
        await cluster.workers(client, 1)
        # When eight of them are queued before the subworker asks for work
        ids = [await client.delay("echo", "y" * 1300) for _ in range(8)]
        results = await asyncio.gather(*(client.wait_result(t) for t in ids))
    # Then all of them ran, none stranded in an assignment that could not be sent
    assert [r.status for r in results] == [TaskStatus.SUCCESS] * 8


async def test_a_task_too_big_to_ever_dispatch_is_refused_at_submission(
    cluster: Cluster,
) -> None:
    cluster.control_plane("--max-message-size", "4096")
    async with cluster.client(max_message_size=4096) as client:
        with pytest.raises(RequestRejected) as refused:
            await client.delay("echo", "z" * 3500)
        assert refused.value.code == "oversize"
        assert (await client.submit_task("add", args=(1, 1))).result == 2


async def test_a_result_too_big_to_report_fails_that_task_and_the_worker_carries_on(
    cluster: Cluster,
) -> None:
    cluster.control_plane(local_concurrency=0)
    cluster.subworker("--max-message-size", "4096")
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        big = await client.submit_task("text_of", args=(10_000,))
        after = await client.submit_task("add", args=(2, 3))
    assert big.status == TaskStatus.FAILURE
    assert big.error is not None
    assert big.error.type == "ResultTooLarge"
    assert after.result == 5


async def test_a_client_waiting_when_the_control_plane_stops_is_told_so(
    cluster: Cluster,
) -> None:
    plane = cluster.control_plane("--shutdown-timeout", "0.5", local_concurrency=0)
    async with cluster.client(retries=0) as client:
        waiting = asyncio.ensure_future(client.submit_task("add", args=(1, 2), timeout=60))

        async def queued() -> bool:
            return len(await client.list_tasks(status="queued")) == 1

        await wait_until(queued, what="the task to be queued")
        plane.signal(signal.SIGTERM)
        with pytest.raises(RequestRejected) as refused:
            await asyncio.wait_for(waiting, 20)
    assert refused.value.code == "shutting_down"
    assert plane.wait() == 0


async def test_a_subworker_whose_registration_is_too_big_says_so_and_exits(
    cluster: Cluster,
) -> None:
    cluster.control_plane(local_concurrency=0)
    subworker = cluster.subworker("--max-message-size", "1024")

    code = await asyncio.to_thread(subworker.popen.wait, 30)

    assert code == 2
    assert "cannot register: Register is" in subworker.output()
    assert "raise --max-message-size" in subworker.output()


async def test_a_control_plane_whose_own_subworker_cannot_register_stops_saying_why(
    cluster: Cluster,
) -> None:
    plane = cluster.control_plane("--max-message-size", "1024")

    code = await asyncio.to_thread(plane.popen.wait, 30)

    assert code == 1
    assert "the embedded subworker failed: EncodeError: Register is" in plane.output()
