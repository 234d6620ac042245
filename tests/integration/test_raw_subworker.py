"""A subworker written against PROTOCOL.md alone (raw pynng + msgspec, no SDK) can
register, pull work and report it, with `report` or inside its next `fetch`."""

from __future__ import annotations

import asyncio

import msgspec
import pynng
from harness import Cluster

from fastworker import Client

ENCODE = msgspec.msgpack.encode
DECODE = msgspec.msgpack.decode


async def _call(sock: pynng.Req0, message: dict[str, object]) -> dict[str, object]:
    context = sock.new_context()
    try:
        await context.asend(ENCODE({"v": 1, **message}))
        reply: dict[str, object] = DECODE(await asyncio.wait_for(context.arecv(), 10))
    finally:
        context.close()
    return reply


async def _serve_one(sock: pynng.Req0, *, report_in_fetch: bool) -> None:
    """Fetch until one task arrives, run `double`, report its outcome."""
    while True:
        reply = await _call(sock, {"op": "fetch", "worker_id": "raw-1", "wait": 1.0})
        assert reply["op"] == "assign", reply
        tasks = reply["tasks"]
        assert isinstance(tasks, list)
        if tasks:
            break
    task = tasks[0]
    outcome = {"task_id": task["id"], "ok": True, "result": task["args"][0] * 2}
    if report_in_fetch:
        done = await _call(
            sock, {"op": "fetch", "worker_id": "raw-1", "wait": 0.0, "outcomes": [outcome]}
        )
        assert (done["op"], done["tasks"]) == ("assign", [])  # other fields may be added
    else:
        done = await _call(sock, {"op": "report", "worker_id": "raw-1", "outcomes": [outcome]})
        assert done["op"] == "ack", done


async def test_a_hand_written_subworker_runs_tasks_for_an_sdk_client(cluster: Cluster) -> None:
    cluster.control_plane(local_concurrency=0)
    registration = f"tcp://127.0.0.1:{cluster.base_port + 5}"
    with pynng.Req0(dial=registration, async_backend="asyncio") as sock:
        sock.resend_time = -1
        async with cluster.client() as client:
            registered = await _call(
                sock,
                {
                    "op": "register",
                    "worker_id": "raw-1",
                    "name": "raw",
                    "concurrency": 1,
                    "tasks": [
                        {
                            "name": "double",
                            "params": [{"name": "x", "kind": "POSITIONAL_OR_KEYWORD"}],
                        }
                    ],
                },
            )
            assert registered["op"] == "registered", registered
            for report_in_fetch in (False, True):
                task_id = await client.delay("double", 21)
                await _serve_one(sock, report_in_fetch=report_in_fetch)
                assert await client.wait(task_id, timeout=10) == 42
            await _assert_listed(client)


async def _assert_listed(client: Client) -> None:
    [worker] = await client.list_workers()
    assert (worker.worker_id, worker.tasks, worker.completed) == ("raw-1", ["double"], 2)
