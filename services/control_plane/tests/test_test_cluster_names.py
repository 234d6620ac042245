"""Task names in the test ``Cluster``: two modules' ``notify`` both run, each by its own
name; a unique short name resolves to its full name; an ambiguous one is refused."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from fastworker import SyncClient, Task, TaskRegistry, UnknownTask, task
from fastworker.testing import Cluster

NOTIFY = """
@task(registry=registry)
def notify(user: str) -> str:
    return __name__ + " notified " + user
"""


def define(registry: TaskRegistry, module: str, source: str) -> Task[..., Any]:
    """The task ``source`` defines, as if it were written in ``module``."""
    scope: dict[str, Any] = {"__name__": module, "task": task, "registry": registry}
    exec(textwrap.dedent(source), scope)  # test code, written right here
    [found] = [v for v in scope.values() if isinstance(v, Task)]
    return found


registry = TaskRegistry()
billing_notify = define(registry, "billing.tasks", NOTIFY)
shop_notify = define(registry, "shop.tasks", NOTIFY)
monthly = define(registry, "billing.reports", "@task(registry=registry)\ndef monthly(): return 12")


def test_tasks_of_the_same_function_name_run_by_their_full_names_in_a_cluster() -> None:
    with Cluster(registry) as cluster, SyncClient() as client:
        # When each notify is submitted by its Task object
        billing_id = client.delay(billing_notify, "ann")
        shop_id = client.delay(shop_notify, "bob")
        cluster.drain()

        # Then each runs its own function, reported under its full name
        assert client.wait(billing_id) == "billing.tasks notified ann"
        assert client.wait(shop_id) == "shop.tasks notified bob"
        assert cluster.results[shop_id].name == "shop.tasks.notify"


def test_a_unique_short_name_runs_its_task_and_an_ambiguous_one_is_refused() -> None:
    with Cluster(registry) as cluster, SyncClient() as client:
        task_id = client.delay("monthly")
        cluster.drain()
        assert client.wait(task_id) == 12
        assert cluster.results[task_id].name == "billing.reports.monthly"

        with pytest.raises(UnknownTask, match="give the full name") as refused:
            client.delay("notify", "ann")
        assert "task name 'notify' is ambiguous: billing.tasks.notify, shop.tasks.notify" in str(
            refused.value
        )
