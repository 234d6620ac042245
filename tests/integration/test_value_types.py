"""UUIDs, Decimals and registered types cross real processes as themselves (PROTOCOL.md
§3, "Portable values"): client -> control plane -> subworker (thread or child process) ->
result -> client, through the control plane's journal and its HTTP JSON; an unregistered
type is refused at submit, or fails its task, naming ``fastworker.register_type``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from uuid import UUID

import aiohttp
import pytest
from harness import Cluster
from http_helpers import get_json, wait_for_status
from it_values import (
    Money,
    Unregistered,
    order_total,
    typed_echo,
    typed_echo_in_a_child,
    unregistered_result,
)

from fastworker import Client, InvalidArguments, TaskStatus

MODULES = ("--task-modules", "it_tasks", "it_values")
ORDER = UUID("12345678-1234-5678-1234-567812345678")
LINES = [Money(Decimal("19.90"), "EUR"), Money(Decimal("0.10"), "EUR")]


@pytest.fixture
async def remote_client(cluster: Cluster) -> AsyncIterator[Client]:
    """A control plane that runs nothing itself, and one real subworker that runs all."""
    cluster.control_plane(*MODULES, local_concurrency=0)
    cluster.subworker(*MODULES, concurrency=2)
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        yield client


@pytest.mark.parametrize("echo", [typed_echo, typed_echo_in_a_child], ids=["thread", "process"])
async def test_uuid_decimal_and_a_registered_type_reach_the_task_and_come_back_as_themselves(
    remote_client: Client, echo: object
) -> None:
    # Given a UUID, a Decimal with a trailing zero and a registered dataclass
    sent = [ORDER, Decimal("1.10"), LINES[0]]
    # When a real subworker echoes them
    result = await remote_client.submit_task(echo, args=(sent,))  # type: ignore[arg-type]
    # Then the task saw them as themselves, and the client gets them back as themselves
    assert result.status == TaskStatus.SUCCESS, result.error
    assert result.result == {"value": sent, "types": ["UUID", "Decimal", "Money"]}
    assert str(result.result["value"][1]) == "1.10"


async def test_a_result_made_of_registered_types_comes_back_as_them(
    remote_client: Client,
) -> None:
    result = await remote_client.submit_task(order_total, args=(ORDER, LINES))
    assert result.status == TaskStatus.SUCCESS, result.error
    assert result.result == {"order": ORDER, "total": Money(Decimal("20.00"), "EUR")}


async def test_an_unregistered_type_is_refused_at_submit_naming_the_hook(
    remote_client: Client,
) -> None:
    with pytest.raises(InvalidArguments, match=r"args\[0\]\['u'\] has type") as refused:
        await remote_client.delay(typed_echo, {"u": Unregistered(1)})
    assert "fastworker.register_type(" in refused.value.message
    assert await remote_client.list_tasks() == []


async def test_an_unregistered_result_fails_as_unserializable_naming_the_hook(
    remote_client: Client,
) -> None:
    result = await remote_client.submit_task(unregistered_result, timeout=10)
    assert result.status == TaskStatus.FAILURE
    assert result.error is not None
    assert result.error.reason == "unserializable_result"
    assert "fastworker.register_type(" in result.error.message


async def test_they_survive_the_journal_and_show_in_the_http_api(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a durable control plane that keeps arguments, and one finished order
    state = ("--state-dir", str(tmp_path / "state"), "--result-keep-arguments")
    plane = cluster.control_plane(*MODULES, *state)
    async with cluster.client() as client:
        done = await client.submit_task(order_total, args=(ORDER, LINES))
    assert done.status == TaskStatus.SUCCESS, done.error
    # When it is stopped and started again on its journal
    plane.stop()
    cluster.control_plane(*MODULES, *state)
    async with cluster.client() as client:
        kept = await client.get_task_result(done.task_id)
    # Then the result read back is made of the same types
    assert kept is not None
    assert kept.result == {"order": ORDER, "total": Money(Decimal("20.00"), "EUR")}
    # And its page shows a UUID as its text, and a type the control plane need not know
    # as its code and size
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        await wait_for_status(http, f"{cluster.http}/readyz", 200)
        status, page = await get_json(http, f"{cluster.http}/api/tasks/{done.task_id}")
    assert status == 200
    assert page["args"][0] == str(ORDER)
    assert page["args"][1][0].startswith("ext(40, ")
    assert page["result"]["order"] == str(ORDER)
