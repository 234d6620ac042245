"""Values cross the wire as what they are (PROTOCOL.md §3, "Portable values"): a value that
would come back as something else is refused, at submit or as the task's failure."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from uuid import UUID

import pytest
from harness import Cluster

from fastworker import Client, InvalidArguments, TaskStatus


@pytest.fixture
async def remote_client(cluster: Cluster) -> AsyncIterator[Client]:
    """A client of a control plane that runs nothing itself, so a real subworker runs all."""
    cluster.control_plane(local_concurrency=0)
    cluster.subworker(concurrency=2)
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        yield client


@pytest.mark.parametrize(("kind", "named"), [("set", "set")])
async def test_a_result_that_would_be_coerced_fails_as_unserializable_naming_its_type(
    remote_client: Client, kind: str, named: str
) -> None:
    result = await remote_client.submit_task("coerced", args=(kind,), timeout=10)
    assert result.status == TaskStatus.FAILURE
    assert result.error is not None
    assert result.error.reason == "unserializable_result"
    assert f"result has type {named}" in result.error.message
    assert result.result is None


async def test_an_aware_datetime_round_trips_as_the_same_instant_in_utc(
    remote_client: Client,
) -> None:
    when = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=2)))
    result = await remote_client.submit_task("echo", args=({"at": when, "pair": (1, "b")},))
    assert result.status == TaskStatus.SUCCESS, result.error
    assert result.result == {"at": when, "pair": [1, "b"]}  # a tuple comes back a list
    assert result.result["at"].tzinfo == UTC


async def test_a_uuid_or_a_decimal_result_comes_back_as_itself(remote_client: Client) -> None:
    # (built-in extension types: see test_value_types.py for arguments and registered types)
    for kind, expected in (("decimal", Decimal("1.10")), ("uuid", UUID(int=5))):
        result = await remote_client.submit_task("coerced", args=(kind,), timeout=10)
        assert result.status == TaskStatus.SUCCESS, result.error
        assert (type(result.result), str(result.result)) == (type(expected), str(expected))


async def test_a_big_int_or_a_set_is_refused_at_submit_and_nothing_is_queued(
    remote_client: Client,
) -> None:
    with pytest.raises(InvalidArguments, match=r"echo\(\): args\[0\] is an int outside"):
        await remote_client.submit_task("echo", args=(2**64,), timeout=10)
    with pytest.raises(InvalidArguments, match=r"args\[0\]\['id'\] has type set"):
        await remote_client.delay("echo", {"id": {1}})
    assert await remote_client.list_tasks() == []
    assert (await remote_client.submit_task("echo", args=(2**64 - 1,))).result == 2**64 - 1
