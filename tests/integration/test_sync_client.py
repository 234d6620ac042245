"""The blocking client against real control planes: the same behaviour as the async one
on every path (each such test runs with both), plus what only a blocking client has:
threads sharing it, no event loop or thread of its own, and a ``stop`` from another
thread ending a blocked call."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pynng
import pytest
from harness import Cluster

from fastworker import (
    Client,
    ControlPlaneUnavailable,
    InvalidArguments,
    MessageTooLarge,
    SyncClient,
    TaskNotFound,
    TaskStatus,
    Timeout,
    Unauthorized,
    UnknownTask,
)
from fastworker.testing import free_port_block
from fastworker_protocol import PortMap

FLAVOURS = ("async", "sync")
TOKEN = "sync-client-test-token-1d2e"


class Blocking:
    """A started SyncClient seen from an async test: every call runs in a worker thread,
    as a WSGI view's would."""

    def __init__(self, client: SyncClient) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call


@asynccontextmanager
async def opened(flavour: str, *args: Any, **options: Any) -> AsyncIterator[Any]:
    """A started client of the flavour: the async ``Client``, or a ``SyncClient`` behind
    ``Blocking``; ``start`` errors are raised as they are."""
    if flavour == "async":
        async with Client(*args, **options) as client:
            yield client
        return
    sync = SyncClient(*args, **options)
    await asyncio.to_thread(sync.start)
    try:
        yield Blocking(sync)
    finally:
        await asyncio.to_thread(sync.stop)


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def plane(cluster: Cluster) -> Cluster:
    cluster.control_plane()
    async with cluster.client() as ready:
        await cluster.workers(ready, 1)
    return cluster


# --- the same behaviour from both clients -----------------------------------------------------


async def test_the_calls_answer_as_the_async_client_does(plane: Cluster, flavour: str) -> None:
    async with opened(flavour, plane.discovery, timeout=20) as client:
        result = await client.submit_task("add", args=(20, 22))
        task_id = await client.delay("echo", "hello", priority="high")
        ids = await client.submit_batch([("add", (i, i)) for i in range(1500)])  # 2 messages
        waited = await client.wait_results([task_id, *ids], timeout=20)
        value = await client.wait(task_id)
        later = await client.get_task_result(task_id)
        listed = await client.list_tasks(limit=5)
        workers = await client.list_workers()
        schedules = await client.list_schedules()
    assert result.result == 42
    assert result.status == TaskStatus.SUCCESS
    assert value == "hello"
    assert later is not None
    assert later.result == "hello"
    assert [r.result for r in waited[1:]] == [2 * i for i in range(1500)]
    assert len(listed) == 5
    assert listed.more is False
    assert len(workers) == 1
    assert schedules == []


async def test_refusals_raise_the_same_errors(plane: Cluster, flavour: str) -> None:
    async with opened(flavour, plane.discovery, timeout=20) as client:
        with pytest.raises(UnknownTask):
            await client.delay("no_such_task")
        with pytest.raises(InvalidArguments, match="set"):
            await client.delay("add", {1}, 2)
        with pytest.raises(MessageTooLarge):
            await client.delay("echo", "x" * (20 * 1024 * 1024))
        with pytest.raises(TaskNotFound):
            await client.wait_result("0" * 32, timeout=1)
        assert await client.get_task_result("0" * 32) is None
        running = await client.delay("nap", 5, "long")
        with pytest.raises(Timeout, match="still"):
            await client.wait_result(running, timeout=0.3)
        assert await client.cancel_task(running) is True
        # and the client still works after each of them
        assert await client.wait(await client.delay("add", 1, 1), timeout=10) == 2


async def test_nothing_at_an_address_fails_within_the_connect_budget(flavour: str) -> None:
    dead = f"tcp://127.0.0.1:{free_port_block(6)}"
    started = time.monotonic()
    async with opened(flavour, address=dead) as client:  # default timeout 30 s, retries 3
        with pytest.raises(ControlPlaneUnavailable, match=dead.rsplit(":", 1)[0]):
            await client.delay("add", 1, 2)
        with pytest.raises(ControlPlaneUnavailable, match="no control plane answered"):
            await client.submit_task("add", args=(1, 2))
    assert time.monotonic() - started < 9  # 3 s each, not 120 s


async def test_nobody_on_discovery_fails_within_the_connect_budget(flavour: str) -> None:
    nobody = f"tcp://127.0.0.1:{free_port_block(1)}"
    started = time.monotonic()
    with pytest.raises(ControlPlaneUnavailable, match=f"announced itself at {nobody} within 3 s"):
        async with opened(flavour, nobody):
            pass
    assert time.monotonic() - started < 5


async def test_a_silent_control_plane_times_out_at_the_deadline_and_a_retry_runs_once(
    cluster: Cluster, flavour: str
) -> None:
    # Given a control plane that stops answering (SIGSTOP) for longer than one attempt
    plane = cluster.control_plane()
    async with cluster.client() as ready:
        await cluster.workers(ready, 1)
    async with (
        opened(flavour, cluster.discovery, timeout=1.0, retries=1) as hasty,
        opened(flavour, cluster.discovery, timeout=6, retries=20) as patient,
    ):
        for connected in (hasty, patient):  # connect the sockets used below
            await connected.wait(await connected.delay("add", 0, 0), timeout=10)
        plane.signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(Timeout, match="no reply"):
                await hasty.get_task_result("x")
            took = time.monotonic() - started
            # When a patient client submits meanwhile (its first attempts go unanswered)
            submitting = asyncio.ensure_future(patient.delay("nap", 0, "once"))
            done, _ = await asyncio.wait([submitting], timeout=1.0)
            assert not done, "the stopped control plane cannot have answered"
            plane.signal(signal.SIGCONT)
            task_id = await submitting
            result = await patient.wait_result(task_id, timeout=10)
            listed = await patient.list_tasks(status="success")
        finally:
            plane.signal(signal.SIGCONT)
    # Then the silent call ended at its 1 s deadline, and the resent task ran once
    assert 0.9 <= took < 3
    assert result.status == TaskStatus.SUCCESS
    assert result.attempts == 1
    assert [t.task_id for t in listed if t.name == "it_tasks.nap"] == [task_id]


async def test_a_held_wait_outlasts_the_call_timeout(plane: Cluster, flavour: str) -> None:
    async with opened(flavour, plane.discovery, timeout=0.5, connect_timeout=0.5) as quick:
        task_id = await quick.delay("nap", 1.5, "held")
        result = await quick.wait_result(task_id, timeout=10)
    assert result.status == TaskStatus.SUCCESS


async def test_the_auth_token_is_sent_and_its_absence_refused(
    cluster: Cluster, flavour: str
) -> None:
    cluster.control_plane(env=cluster.env(FASTWORKER_AUTH_TOKEN=TOKEN))
    base = f"tcp://127.0.0.1:{cluster.base_port}"
    async with opened(flavour, address=base, auth_token=TOKEN, connect_timeout=20) as good:
        assert (await good.submit_task("add", args=(1, 2))).result == 3
    async with opened(flavour, address=base) as bad:
        with pytest.raises(Unauthorized):
            await bad.delay("add", 1, 2)


# --- what only the blocking client has --------------------------------------------------------


async def test_threads_sharing_one_sync_client_each_get_their_own_replies(plane: Cluster) -> None:
    threads, calls = 8, 60

    def share() -> list[list[object]]:
        seen: list[list[object]] = [[] for _ in range(threads)]
        with SyncClient(plane.discovery, timeout=20) as client:

            def work(n: int) -> None:
                for i in range(calls):
                    tag = f"{n}-{i}"
                    if i % 3 == 0:
                        seen[n].append(client.submit_task("echo", args=(tag,)).result)
                    elif i % 3 == 1:
                        seen[n].append(client.wait(client.delay("echo", tag), timeout=20))
                    else:
                        got = client.wait_result(client.delay("echo", tag), timeout=20)
                        seen[n].append(got.result)

            workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
            for t in workers:
                t.start()
            for t in workers:
                t.join(60)
        return seen

    seen = await asyncio.wait_for(asyncio.to_thread(share), 90)
    assert seen == [[f"{n}-{i}" for i in range(calls)] for n in range(threads)]


async def test_sync_calls_start_no_thread_and_callbacks_one(plane: Cluster) -> None:
    def use() -> tuple[int, int, int]:
        before = threading.active_count()
        with SyncClient(plane.discovery, timeout=20) as client:
            client.wait(client.delay("add", 1, 2))
            client.submit_task("add", args=(1, 2))
            client.list_tasks()
            plain = threading.active_count()
            called = threading.Event()
            client.delay_with_callback("add", lambda _: called.set(), 2, 3)
            assert called.wait(20), "the callback never ran"
            with_callbacks = threading.active_count()
        return before, plain, with_callbacks

    before, plain, with_callbacks = await asyncio.to_thread(use)
    assert plain == before
    assert with_callbacks == before + 1


async def test_stop_from_another_thread_ends_a_blocked_call_at_once(plane: Cluster) -> None:
    client = SyncClient(plane.discovery, timeout=60)
    await asyncio.to_thread(client.start)
    task_id = await asyncio.to_thread(client.delay, "nap", 30, "long")
    waiting = asyncio.ensure_future(asyncio.to_thread(client.wait_result, task_id, 30))
    done, _ = await asyncio.wait([waiting], timeout=0.5)
    assert not done
    started = time.monotonic()
    await asyncio.to_thread(client.stop)
    with pytest.raises(ControlPlaneUnavailable, match="closed"):
        await asyncio.wait_for(waiting, 5)
    assert time.monotonic() - started < 2
    with pytest.raises(Exception, match="not started"):
        client.delay("add", 1, 2)


async def test_a_killed_control_plane_fails_a_held_wait_without_hanging(cluster: Cluster) -> None:
    plane = cluster.control_plane()
    async with cluster.client() as ready:
        await cluster.workers(ready, 1)
    with SyncClient(cluster.discovery, timeout=5, retries=1) as client:
        task_id = await asyncio.to_thread(client.delay, "nap", 30, "long")
        waiting = asyncio.ensure_future(asyncio.to_thread(client.wait_result, task_id, 4))
        done, _ = await asyncio.wait([waiting], timeout=0.5)
        assert not done
        plane.signal(signal.SIGKILL)
        with pytest.raises((ControlPlaneUnavailable, Timeout)):
            await asyncio.wait_for(waiting, 15)


def test_a_reply_of_the_wrong_kind_is_an_error_not_a_value() -> None:
    ports = PortMap(base=free_port_block(6))
    with pynng.Rep0(listen=f"tcp://127.0.0.1:{ports.results}") as fake_results:

        def answer() -> None:
            with contextlib.suppress(pynng.Closed):
                fake_results.recv()
                fake_results.send(b"\x93not a reply")

        server = threading.Thread(target=answer)
        server.start()
        try:
            with (
                SyncClient(address=f"tcp://127.0.0.1:{ports.base}", timeout=5, retries=0) as client,
                pytest.raises(ControlPlaneUnavailable, match="unreadable reply"),
            ):
                client.get_task_result("x")
        finally:
            server.join(10)
