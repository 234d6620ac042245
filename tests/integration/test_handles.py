"""Handles against a real control plane and subworker: what ``delay``, ``apply_async`` and
``submit_workflow`` return, read and cancelled through the client that made them, and still
the plain id wherever an id goes."""

from __future__ import annotations

import pickle

import it_tasks
import pytest
from harness import Cluster

from fastworker import (
    AsyncTaskHandle,
    Client,
    SyncClient,
    TaskCancelled,
    TaskFailed,
    TaskHandle,
    TaskNotFound,
    TaskStatus,
    WorkflowHandle,
    chain,
    chord,
    group,
)
from fastworker.canvas import Workflow


async def test_an_async_handle_is_the_id_and_reads_the_task_from_the_control_plane(
    client: Client,
) -> None:
    handle = await client.delay(it_tasks.add, 2, 3)
    assert isinstance(handle, AsyncTaskHandle)
    assert await handle == 5
    assert await handle.get(timeout=5) == 5
    assert await handle.status() is TaskStatus.SUCCESS
    assert await handle.ready()
    assert (await handle.result()).result == 5
    # the id, wherever an id goes: equal, hashable, sent in requests, stored as text
    assert handle == handle.id == str(handle)
    assert {handle: 1}[handle.id] == 1
    assert (await client.wait_result(handle)).task_id == handle.id
    assert pickle.loads(pickle.dumps(handle)) == handle.id
    assert type(pickle.loads(pickle.dumps(handle))) is str


async def test_a_handle_status_is_the_servers_not_a_cache(client: Client) -> None:
    # a task the client never saw a result of: the old cache said None, the handle asks
    slow = await client.delay("nap", 30)
    assert client.last_seen_status(slow) is None
    assert await slow.status() in (TaskStatus.QUEUED, TaskStatus.ASSIGNED, TaskStatus.RUNNING)
    assert not await slow.ready()
    assert await slow.cancel()
    assert await slow.status() is TaskStatus.CANCELLED
    assert await slow.ready()
    with pytest.raises(TaskCancelled):
        await slow


async def test_a_failed_task_raises_through_its_handle(client: Client) -> None:
    handle = await client.delay("explode", "boom")
    with pytest.raises(TaskFailed) as failed:
        await handle.get(timeout=10)
    assert failed.value.remote_message == "boom"
    assert await handle.status() is TaskStatus.FAILURE


async def test_a_handle_made_from_an_id_reads_the_same_task(client: Client) -> None:
    task_id = (await client.delay("add", 1, 1)).id
    assert await client.handle(task_id).get(timeout=10) == 2
    with pytest.raises(TaskNotFound):
        await client.handle("never-submitted").status()


async def test_a_handle_goes_as_a_task_argument_as_its_id(client: Client) -> None:
    handle = await client.delay("add", 1, 1)
    echoed = await client.delay("echo", handle)
    assert await echoed == handle.id


def test_a_blocking_handle_gets_waits_cancels(cluster: Cluster) -> None:
    cluster.control_plane()
    with SyncClient(cluster.discovery, timeout=20) as sync:
        handle = sync.delay(it_tasks.add, 4, 5)
        assert isinstance(handle, TaskHandle)
        assert handle.get(timeout=10) == 9
        assert handle.status() is TaskStatus.SUCCESS
        assert handle.ready()
        slow = sync.apply_async("nap", (30,))
        assert not slow.ready()
        assert slow.cancel()
        with pytest.raises(TaskCancelled):
            slow.get(timeout=5)


def test_a_workflow_handle_gets_the_value_the_workflow_leaves(cluster: Cluster) -> None:
    cluster.control_plane()
    with SyncClient(cluster.discovery, timeout=20) as sync:
        # a chain: its last step's result
        chained = sync.submit_workflow(it_tasks.add.s(1, 2) | it_tasks.add.s(10))
        assert isinstance(chained, WorkflowHandle)
        assert chained.get(timeout=10) == 13
        assert chained.ready()
        # a group: the list of its members' results, in member order
        grouped = sync.submit_workflow(group(it_tasks.add.s(i, i) for i in range(4)))
        assert grouped.get(timeout=10) == [0, 2, 4, 6]
        # a chord: its callback's result
        chorded = sync.submit_workflow(
            chord([it_tasks.add.s(i, 1) for i in range(3)], it_tasks.tsum.s())
        )
        assert chorded.get(timeout=10) == 6
        # nested: a chain ending in a group of chains
        nested = sync.submit_workflow(
            chain(
                it_tasks.add.si(1, 1),
                group(it_tasks.add.s(1), it_tasks.add.s(2) | it_tasks.add.s(100)),
            )
        )
        assert nested.get(timeout=10) == [3, 104]
        # a Workflow with two last steps, read from its id alone: the list of their results
        wf = Workflow()
        first = wf.add(it_tasks.add.si(1, 2))
        wf.add(it_tasks.add.si(3, 4), after=[first])
        wf.add(it_tasks.add.si(5, 6), after=[first])
        submitted = sync.submit_workflow(wf)
        assert sync.workflow_handle(submitted.id).get(timeout=10) == [7, 11]


def test_a_failed_workflow_raises_its_failed_steps_error(cluster: Cluster) -> None:
    cluster.control_plane()
    with SyncClient(cluster.discovery, timeout=20) as sync:
        failing = sync.submit_workflow(it_tasks.add.si(1, 1) | it_tasks.explode.si("mid"))
        with pytest.raises(TaskFailed) as failed:
            failing.get(timeout=10)
        assert failed.value.remote_message == "mid"


async def test_an_async_workflow_handle_is_awaitable(client: Client) -> None:
    handle = await client.submit_workflow(it_tasks.add.s(1, 2) | it_tasks.add.s(3))
    assert await handle == 6
    assert not await handle.cancel()  # it has ended
