"""``Client`` and ``SyncClient`` offer the same calls: the same names, the same parameters
(names, kinds, defaults, types) and the same results, the sync one returning what the async
one's ``await`` gives. The differences that are meant are listed here, each with its
reason, so a method added to one client and not to the other fails until it is added to
both or listed."""

from __future__ import annotations

import inspect
import threading
import typing
from typing import Any

import pytest

from fastworker import Client, SyncClient, TaskRegistry, TaskResult, task
from fastworker.testing import eager

# Same call, named by each side's convention (``contextlib.aclosing``, ``async with``).
COUNTERPARTS = {
    "aclose": "close",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
}

ASYNC_ONLY = {
    "events": "an async iterator of watched results; blocking code gets them by callback "
    "(SyncClient.watch), or iterates SyncClient.async_client.events() on its thread",
    "events_dropped": "counts what events() dropped from its buffer, which only Client has",
}

SYNC_ONLY = {
    "async_client": "the Client that SyncClient runs on its callback thread, for async callbacks",
}

# Called without ``await`` on both sides: they do no I/O.
NOT_AWAITED = {
    "stop",
    "get_result",
    "get_status",
    "last_seen_result",
    "last_seen_status",
    "watch",
    "handle",
    "workflow_handle",
}

# The handles each client returns: the same methods, awaited on the async client's.
HANDLES = {"AsyncTaskHandle": "TaskHandle", "AsyncWorkflowHandle": "WorkflowHandle"}

PUBLIC_DUNDERS = {"__init__", "__enter__", "__exit__", "__aenter__", "__aexit__"}


def public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") or n in PUBLIC_DUNDERS}


def shape(fn: Any) -> tuple[list[tuple[str, Any, Any, Any]], Any]:
    """Parameters (name, kind, default, annotation) and return annotation."""
    signature = inspect.signature(fn)
    params = [(p.name, p.kind, p.default, p.annotation) for p in signature.parameters.values()]
    returned = signature.return_annotation
    if isinstance(returned, str):
        for async_handle, sync_handle in HANDLES.items():
            returned = returned.replace(async_handle, sync_handle)
    return params, returned


def shared() -> list[str]:
    names = public(Client) & public(SyncClient)
    return sorted(n for n in names if callable(getattr(Client, n)))


def test_every_public_name_is_on_both_clients_unless_listed_as_a_difference() -> None:
    async_names = public(Client) - set(COUNTERPARTS)
    sync_names = public(SyncClient) - set(COUNTERPARTS.values())

    assert async_names - sync_names == set(ASYNC_ONLY)
    assert sync_names - async_names == set(SYNC_ONLY)


@pytest.mark.parametrize("name", shared())
def test_a_method_on_both_clients_takes_the_same_parameters_and_gives_the_same_result(
    name: str,
) -> None:
    assert shape(getattr(SyncClient, name)) == shape(getattr(Client, name))


@pytest.mark.parametrize(("async_name", "sync_name"), sorted(COUNTERPARTS.items()))
def test_a_call_named_by_each_sides_convention_takes_the_same_parameters(
    async_name: str, sync_name: str
) -> None:
    assert inspect.iscoroutinefunction(getattr(Client, async_name))
    assert not inspect.iscoroutinefunction(getattr(SyncClient, sync_name))
    assert shape(getattr(SyncClient, sync_name)) == shape(getattr(Client, async_name))


@pytest.mark.parametrize("name", shared())
def test_the_async_client_awaits_what_the_sync_client_blocks_on(name: str) -> None:
    if name == "__init__":
        return
    awaited = inspect.iscoroutinefunction(getattr(Client, name))

    assert awaited == (name not in NOT_AWAITED)
    assert not inspect.iscoroutinefunction(getattr(SyncClient, name))


@pytest.mark.parametrize("name", shared())
def test_an_overloaded_method_has_the_same_overloads_on_both_clients(name: str) -> None:
    overloads = [shape(f) for f in typing.get_overloads(getattr(Client, name))]

    assert [shape(f) for f in typing.get_overloads(getattr(SyncClient, name))] == overloads


def test_a_property_on_both_clients_gives_the_same_type() -> None:
    names = sorted(n for n in public(Client) & public(SyncClient) if n not in shared())
    assert names == ["started"]  # the only shared property; a new one is checked here too
    for name in names:
        async_property, sync_property = getattr(Client, name), getattr(SyncClient, name)
        assert isinstance(async_property, property)
        assert isinstance(sync_property, property)
        assert shape(sync_property.fget) == shape(async_property.fget)


def test_both_clients_show_the_same_settings_as_attributes() -> None:
    options: dict[str, Any] = {"timeout": 7.5, "retries": 1, "connect_timeout": 2.0}
    async_client = Client("tcp://127.0.0.1:5999", **options)
    sync_client = SyncClient("tcp://127.0.0.1:5999", **options)

    shown = {k: v for k, v in vars(async_client).items() if not k.startswith("_")}
    assert shown == {"discovery_address": "tcp://127.0.0.1:5999", **options}
    assert {k: v for k, v in vars(sync_client).items() if not k.startswith("_")} == shown
    assert async_client.started is sync_client.started is False


def test_the_sync_clients_watch_calls_back_with_the_final_result_as_the_async_ones() -> None:
    # Given a task run by eager() and a SyncClient watching it
    registry = TaskRegistry()

    @task(registry=registry)
    def double(x: int) -> int:
        return 2 * x

    seen: list[TaskResult] = []
    called = threading.Event()

    def note(result: TaskResult) -> None:
        seen.append(result)
        called.set()

    with eager(registry), SyncClient() as client:
        task_id = client.delay(double, 21)
        # When it is watched with a callback
        client.watch(task_id, note)
        # Then the callback gets its final result, on the client's background thread
        assert called.wait(10), "the callback never ran"
    assert [(r.task_id, r.result) for r in seen] == [(task_id, 42)]
