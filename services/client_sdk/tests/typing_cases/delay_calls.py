"""Calls mypy --strict must judge: ``test_typed_delay`` runs mypy on this file and expects
an error on exactly the lines marked ``# wrong``. Never imported, never run."""

from typing import Any, assert_type

from fastworker import AsyncTaskHandle, Client, SyncClient, TaskHandle, task


@task
def add(x: int, y: int, *, scale: int = 1) -> int:
    return (x + y) * scale


async def calls(client: Client, sync: SyncClient) -> None:
    await client.delay(add, 1, 2)
    await client.delay(add, 1, 2, scale=3)
    await client.delay("add", "anything", goes=True, priority="high")  # by name: untyped
    await client.delay(add, "not", "ints", z=3)  # wrong
    await client.delay(add, 1)  # wrong
    await client.delay(add, 1, 2, scale="3")  # wrong
    sync.delay(add, 1, 2)
    sync.delay(add, 1, "2")  # wrong
    await client.apply_async(add, (1, 2), priority="high")  # options: apply_async


async def handles(client: Client, sync: SyncClient) -> None:
    # a handle is typed by the task's return type, an async task's awaited value included
    assert_type(await client.delay(add, 1, 2), AsyncTaskHandle[int])
    assert_type(await client.delay(twice, 1), AsyncTaskHandle[int])
    assert_type(await (await client.delay(add, 1, 2)), int)
    assert_type(sync.delay(add, 1, 2).get(timeout=5), int)
    assert_type(add.delay(1, 2).get(), int)
    assert_type(twice.delay(1).get(), int)
    assert_type(sync.delay("add", 1, 2), TaskHandle[Any])  # by name: untyped
    ids: list[str] = [add.delay(1, 2)]  # still an id
    handles: list[TaskHandle[str]] = [add.delay(1, 2)]  # wrong
    print(ids, handles)


@task
async def twice(x: int) -> int:
    return 2 * x


def through_the_default_client() -> None:
    add.delay(1, 2)
    add.delay(1, 2, scale=3)
    add.delay(1, "2")  # wrong
    add.delay(1, 2, z=3)  # wrong
    add.apply_async((1, 2), countdown=60)
    add.delay_on_commit(1, 2)
    add.delay_on_commit("1", 2)  # wrong
