"""Tasks submitted through real sockets come back with the right results."""

from __future__ import annotations

import asyncio
import random

import pytest
from harness import Cluster

from fastworker import Client, Priority, TaskStatus


async def test_a_thousand_tasks_of_mixed_priorities_all_return_their_own_results(
    cluster: Cluster,
) -> None:
    # Given a control plane that runs tasks itself, plus one subworker
    cluster.control_plane()
    cluster.subworker()
    rng = random.Random(7)
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        # When 1,000 tasks go in at random priorities, many in flight at once
        calls = [(i, rng.randint(-1000, 1000), rng.choice(list(Priority))) for i in range(1000)]
        semaphore = asyncio.Semaphore(64)

        async def one(i: int, y: int, priority: Priority) -> tuple[int, object]:
            async with semaphore:
                result = await client.submit_task("add", args=(i, y), priority=priority)
            assert result.status == TaskStatus.SUCCESS, result.error
            return i + y, result.result

        outcomes = await asyncio.gather(*(one(*c) for c in calls))
    # Then every result is the sum of its own arguments
    assert [got for _, got in outcomes] == [want for want, _ in outcomes]


async def test_the_control_plane_alone_is_a_complete_deployment(client: Client) -> None:
    result = await client.submit_task("add", args=(5, 3))
    assert result.status == "success"
    assert result.result == 8
    assert result.attempts == 1
    assert result.worker_id is not None
    assert result.worker_id.startswith("local-")
    assert result.submitted_at is not None
    assert result.finished_at is not None
    assert result.submitted_at <= result.finished_at


async def test_async_and_sync_tasks_both_run(client: Client) -> None:
    slept = await client.submit_task("nap", args=(0.01,), kwargs={"tag": "x"})
    blocked = await client.submit_task("block", args=(0.01,))
    assert slept.result["tag"] == "x"
    assert isinstance(blocked.result, int)


async def test_a_failing_task_reports_the_remote_exception(client: Client) -> None:
    result = await client.submit_task("explode", args=("kaboom",))
    assert result.status == TaskStatus.FAILURE
    assert result.error is not None
    assert result.error.type == "RuntimeError"
    assert result.error.message == "kaboom"
    assert "raise RuntimeError(message)" in result.error.traceback


async def test_a_result_that_cannot_be_sent_is_a_clear_failure(client: Client) -> None:
    result = await client.submit_task("unsendable")
    assert result.status == TaskStatus.FAILURE
    assert result.error is not None
    assert result.error.reason == "unserializable_result"


@pytest.mark.parametrize("depth", [33, 5000], ids=["just-past-the-limit", "deep"])
async def test_a_result_nested_past_the_protocols_limit_is_a_clear_failure(
    cluster: Cluster, depth: int
) -> None:
    cluster.control_plane(local_concurrency=0)
    cluster.subworker(concurrency=1)
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        result = await client.submit_task("nested", args=(depth,), timeout=10)
        follow = await client.submit_task("add", args=(1, 1), timeout=10)
    assert result.status == TaskStatus.FAILURE
    assert result.error is not None
    assert result.error.reason == "unserializable_result"
    assert "nests deeper than the protocol's 32 arrays and maps" in result.error.message
    assert follow.result == 2


async def test_values_of_every_msgpack_type_round_trip(client: Client) -> None:
    value: dict[str, object] = {
        "none": None,
        "t": True,
        "i": -(2**40),
        "f": 1.5,
        "s": "ü",
        "b": b"\x00\xff",
        "l": [1, [2, [3]]],
        "d": {"k": {"j": []}},
    }
    result = await client.submit_task("echo", args=(value,))
    assert result.result == value
