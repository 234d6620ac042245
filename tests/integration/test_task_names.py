"""Task names across real processes (issue 34, item 3): two modules' ``notify`` both
register under module-qualified names and each runs its own function (one in a child
process); a bare name unique among the registered ones resolves to its full name, which
the result, the metrics and the task listing then carry; an ambiguous bare name is refused
as ``unknown_task``, listing the names it could mean, from the API and the CLI."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import it_billing
import it_shop
import pytest
from harness import Cluster
from http_helpers import fastworker

from fastworker import Client, TaskStatus, UnknownTask

MODULES = ("--task-modules", "it_tasks", "it_billing", "it_shop")
AMBIGUOUS = "task name 'notify' is ambiguous: it_billing.notify, it_shop.notify; give the full name"


@pytest.fixture
async def remote_client(cluster: Cluster) -> AsyncIterator[Client]:
    """A control plane that runs nothing itself, and one real subworker loading both
    modules that define ``notify``."""
    cluster.control_plane(*MODULES, local_concurrency=0)
    cluster.subworker(*MODULES, concurrency=2)
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        yield client


async def test_two_modules_notify_both_register_and_each_runs_its_own(
    remote_client: Client,
) -> None:
    # Given a subworker that imported it_billing and it_shop, both defining notify
    [worker] = [w for w in await remote_client.list_workers() if not w.local]
    assert {"it_billing.notify", "it_shop.notify"} <= set(worker.tasks)

    # When each is submitted by its Task object
    billing = await remote_client.submit_task(it_billing.notify, args=("ann",))
    shop = await remote_client.submit_task(it_shop.notify, args=("bob",))

    # Then each ran its own function, and is reported under its full name
    assert billing.status == shop.status == TaskStatus.SUCCESS, (billing.error, shop.error)
    assert (billing.name, billing.result["module"]) == ("it_billing.notify", "it_billing")
    assert (shop.name, shop.result["module"]) == ("it_shop.notify", "it_shop")
    assert shop.result["pid"] != billing.result["pid"]  # it_shop's ran in a child process


async def test_a_unique_bare_name_resolves_and_is_reported_by_its_full_name(
    remote_client: Client, cluster: Cluster
) -> None:
    result = await remote_client.submit_task("monthly_invoice", args=("acme",))
    assert result.status == TaskStatus.SUCCESS, result.error
    assert (result.name, result.result) == ("it_billing.monthly_invoice", "invoice for acme")

    # The dotted suffix and the full name name it too
    for name in ("it_billing.monthly_invoice", "add"):
        again = await remote_client.submit_task(name, args=(1, 2) if name == "add" else ("x",))
        assert again.status == TaskStatus.SUCCESS, again.error
    assert again.name == "it_tasks.add"

    # The metrics and the listing carry the full name
    async with aiohttp.ClientSession() as http, http.get(f"{cluster.http}/metrics") as response:
        metrics = await response.text()
    assert 'task_name="it_billing.monthly_invoice"' in metrics
    assert 'task_name="monthly_invoice"' not in metrics
    listed = {t.name for t in await remote_client.list_tasks()}
    assert {"it_billing.monthly_invoice", "it_tasks.add"} <= listed


async def test_an_ambiguous_bare_name_is_refused_listing_the_candidates(
    remote_client: Client, cluster: Cluster
) -> None:
    with pytest.raises(UnknownTask) as refused:
        await remote_client.submit_task("notify", args=("ann",))
    assert AMBIGUOUS in str(refused.value)

    # The CLI says the same, and exits non-zero
    done = await fastworker(
        cluster, "submit", "--task-name", "notify", "--args", "ann",
        "--discovery-address", cluster.discovery,
    )  # fmt: skip
    assert done.returncode != 0
    assert AMBIGUOUS in done.stderr

    # A bare name that is unique still goes through the CLI
    done = await fastworker(
        cluster, "submit", "--task-name", "monthly_invoice", "--args", "acme",
        "--discovery-address", cluster.discovery,
    )  # fmt: skip
    assert (done.returncode, done.stdout.strip()) == (0, '"invoice for acme"'), done.stderr
