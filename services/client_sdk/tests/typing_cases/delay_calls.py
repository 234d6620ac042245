"""Calls mypy --strict must judge: ``test_typed_delay`` runs mypy on this file and expects
an error on exactly the lines marked ``# wrong``. Never imported, never run."""

from fastworker import Client, SyncClient, task


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


def through_the_default_client() -> None:
    add.delay(1, 2)
    add.delay(1, 2, scale=3)
    add.delay(1, "2")  # wrong
    add.delay(1, 2, z=3)  # wrong
    add.apply_async((1, 2), countdown=60)
    add.delay_on_commit(1, 2)
    add.delay_on_commit("1", 2)  # wrong
