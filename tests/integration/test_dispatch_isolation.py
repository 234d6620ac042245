"""Dispatch with real processes: a backlog for one pool never delays another pool's tasks,
slow tasks are never hoarded in one subworker's buffer, and tasks sent into a fetch the
subworker had given up on (a frozen control plane) come back instead of staying assigned."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import msgspec
import pynng
from harness import Cluster, Proc, wait_until

from fastworker import Client
from fastworker_protocol import TaskState


def pool(cluster: Cluster, module: str, concurrency: int) -> Proc:
    """A subworker that imports only ``module``."""
    return cluster.spawn(
        f"pool-{module}",
        "subworker",
        "--task-modules",
        module,
        "--discovery-address",
        cluster.discovery,
        "--concurrency",
        str(concurrency),
        "--shutdown-timeout",  # the heavy pool's 30 s task is not waited for at teardown
        "1",
    )


async def test_a_backlog_for_a_busy_pool_does_not_delay_an_idle_pools_tasks(
    cluster: Cluster,
) -> None:
    # Given a busy 1-slot "heavy" pool with 3,000 tasks queued, and an idle 4-slot pool
    cluster.control_plane(local_concurrency=0)
    pool(cluster, "it_pool_heavy", 1)
    pool(cluster, "it_pool_light", 4)
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        await client.submit_batch([("heavy", (30.0,)) for _ in range(3_000)])
        # When 5 light tasks are submitted behind them
        started = time.monotonic()
        light = await client.submit_batch([("light", (n,)) for n in range(5)])
        results = await client.wait_results(light, timeout=20)
        took = time.monotonic() - started
    # Then they all ran at once on the idle pool (on main: not within 30 s)
    assert [r.result for r in results] == list(range(5))
    assert took < 10, f"light tasks took {took:.1f} s behind the heavy backlog"


async def test_after_a_run_of_quick_tasks_slow_ones_are_shared_not_hoarded(
    cluster: Cluster,
) -> None:
    # Given three 1-slot subworkers that have just run many quick tasks (a big prefetch)
    cluster.control_plane(local_concurrency=0)
    for _ in range(3):
        cluster.subworker(concurrency=1)
    async with cluster.client() as client:
        await cluster.workers(client, 3)
        warm = await client.submit_batch([("echo", (n,)) for n in range(300)])
        await client.wait_results(warm, timeout=30)
        # When twelve 0.5 s tasks are queued right behind another run of quick ones
        batch = [("echo", (n,)) for n in range(600)] + [("nap", (0.5,)) for _ in range(12)]
        ids = await client.submit_batch(batch)
        results = (await client.wait_results(ids, timeout=30))[600:]
    # Then every subworker ran its share (a hoarder would have taken most of them)
    per_worker = Counter(r.worker_id for r in results)
    assert len(per_worker) == 3, per_worker
    assert max(per_worker.values()) <= 5, per_worker


async def test_tasks_sent_into_a_fetch_the_subworker_gave_up_on_come_back(
    cluster: Cluster,
) -> None:
    # Given a subworker (a raw peer, to give up on a fetch exactly as a subworker does when
    # a frozen control plane answers too late) that confirms the batches it receives
    cluster.control_plane("--heartbeat-timeout", "60", local_concurrency=0)
    registration = f"tcp://127.0.0.1:{cluster.base_port + 5}"
    with pynng.Req0(dial=registration, async_backend="asyncio") as sock:
        sock.resend_time = -1
        registered = await _call(sock, {**_REGISTER, "confirms": True})
        assert registered["op"] == "registered", registered
        async with cluster.client() as client:
            # When its held fetch is abandoned, and tasks are dispatched into it
            abandoned = sock.new_context()  # its reply is never read
            await abandoned.asend(ENCODE({"v": 1, "op": "fetch", "worker_id": "raw", "wait": 5}))
            ids = await client.submit_batch([("double", (n,)) for n in range(3)])
            await wait_until(lambda: _all_assigned(client, ids), 10, "tasks assigned")
            # Then its next fetches, confirming nothing, get them back (on main: never)
            served = await _serve_until_done(sock, 3)
            results = await client.wait_results(ids, timeout=10)
            abandoned.close()
    assert sorted(served) == sorted(ids)
    assert [r.result for r in results] == [0, 2, 4]
    assert [r.attempts for r in results] == [1, 1, 1]


ENCODE, DECODE = msgspec.msgpack.encode, msgspec.msgpack.decode
_REGISTER = {
    "op": "register",
    "worker_id": "raw",
    "name": "raw",
    "concurrency": 4,
    "tasks": [{"name": "double", "params": [{"name": "x", "kind": "POSITIONAL_OR_KEYWORD"}]}],
}


async def _call(sock: pynng.Req0, message: dict[str, Any]) -> dict[str, Any]:
    context = sock.new_context()
    try:
        await context.asend(ENCODE({"v": 1, **message}))
        reply: dict[str, Any] = DECODE(await asyncio.wait_for(context.arecv(), 10))
    finally:
        context.close()
    return reply


async def _all_assigned(client: Client, ids: list[str]) -> bool:
    results = [await client.get_task_result(t) for t in ids]
    return all(r is not None and r.status == TaskState.ASSIGNED for r in results)


async def _serve_until_done(sock: pynng.Req0, count: int) -> list[str]:
    """Fetch, run ``double`` and report, confirming each batch, until ``count`` ran."""
    served: list[str] = []
    received: list[int] = []
    outcomes: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while len(served) < count or outcomes:
        assert time.monotonic() < deadline, f"only {served} came back"
        fetch = {"op": "fetch", "worker_id": "raw", "wait": 0.2, "received": received}
        reply = await _call(sock, {**fetch, "outcomes": outcomes})
        assert reply["op"] == "assign", reply
        received = [reply["batch"]] if reply.get("batch") else []
        outcomes = [
            {"task_id": t["id"], "ok": True, "result": t["args"][0] * 2} for t in reply["tasks"]
        ]
        served += [t["id"] for t in reply["tasks"]]
    return served


async def test_a_running_task_whose_outcome_never_comes_fails_as_timeout_past_its_limit(
    cluster: Cluster,
) -> None:
    # Given a live subworker (a raw peer) that started a task with a 0.5 s limit and will
    # never report its outcome, on a control plane with a 1 s heartbeat timeout
    cluster.control_plane("--heartbeat-timeout", "1", local_concurrency=0)
    registration = f"tcp://127.0.0.1:{cluster.base_port + 5}"
    with pynng.Req0(dial=registration, async_backend="asyncio") as sock:
        sock.resend_time = -1
        assert (await _call(sock, {**_REGISTER, "confirms": True}))["op"] == "registered"
        async with cluster.client() as client:
            await client.apply_async("double", (2,), time_limit=0.5, task_id="limited")
            cancelled: list[str] = []
            received: list[int] = []
            deadline = time.monotonic() + 20
            # When it keeps fetching (so it stays registered) and reports only the start
            while not cancelled:
                assert time.monotonic() < deadline, "never told to stop the task"
                fetch = {"op": "fetch", "worker_id": "raw", "wait": 0.2, "received": received}
                reply = await _call(sock, {**fetch, "started": ["limited"]})
                received = [reply["batch"]] if reply.get("batch") else []
                cancelled = reply["cancel"]
            result = await client.wait_result("limited", timeout=10)
    # Then the control plane failed it as timed out, and told the worker to stop it
    assert cancelled == ["limited"]
    assert (result.status, result.error and result.error.reason) == (TaskState.FAILURE, "timeout")
