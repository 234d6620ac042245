"""``@task(result_ttl=)`` end to end, through the SDK: a task declaring ``result_ttl=0``
gives its result to a client already waiting for it and keeps none; one declaring an hour
keeps it; a failure of a ``result_ttl=0`` task is still kept, in the dead-letter store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from harness import Cluster

from fastworker import Client, TaskStatus

MODULES = ("--task-modules", "it_tasks", "it_results")


@pytest.fixture
async def client(cluster: Cluster) -> AsyncIterator[Client]:
    cluster.control_plane(*MODULES)
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        yield client


async def test_a_result_ttl_of_zero_answers_the_waiter_and_keeps_nothing(client: Client) -> None:
    # A submission that waits gets the result
    done = await client.submit_task("unkept", (21,))
    assert (done.status, done.result) == (TaskStatus.SUCCESS, 42)

    # but nothing is kept for a later read, unlike a task that keeps its results
    assert await client.get_task_result(done.task_id) is None
    kept = await client.submit_task("kept", (2,))
    again = await client.get_task_result(kept.task_id)
    assert again is not None
    assert again.result == 6


async def test_a_failure_is_a_dead_letter_whatever_the_result_ttl(client: Client) -> None:
    done = await client.submit_task("unkept_failure", ())
    assert done.status == TaskStatus.FAILURE

    letter = await client.get_failed(done.task_id)
    assert letter.error is not None
    assert letter.error.message == "failed with no result kept"
