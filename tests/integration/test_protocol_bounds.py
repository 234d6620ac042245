"""PROTOCOL.md's bounds, tried on both sides against a real control plane with raw msgpack
(no project code on the wire): `wait` (§5), timestamps (§3), the size limit (§11) and a
subworker's capacity (§7), each as the spec words it, issue 35."""

from __future__ import annotations

import math
import struct
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pynng
import pytest
from harness import Cluster, wait_until

pytestmark = pytest.mark.integration

MAX_WAIT = 0.5  # the control plane's --max-wait in these tests
LAST_DURATION = 253_402_300_799  # the top of the duration range (§3, "Ranges")
WORKER = "raw-worker-1"
ECHO = {"name": "it_tasks.echo", "params": [{"name": "value", "kind": "POSITIONAL_OR_KEYWORD"}]}


def frame(**message: Any) -> bytes:
    return msgspec.msgpack.encode(message)


async def ask(port: int, data: bytes) -> dict[str, Any]:
    with pynng.Req0(dial=f"tcp://127.0.0.1:{port}", recv_timeout=20_000) as req:
        await req.asend(data)
        reply: dict[str, Any] = msgspec.msgpack.decode(await req.arecv())
    return reply


class Ports:
    def __init__(self, cluster: Cluster) -> None:
        self.submit = cluster.base_port + 2  # normal priority
        self.results = cluster.base_port + 4
        self.registration = cluster.base_port + 5


@pytest.fixture
async def ports(cluster: Cluster) -> Ports:
    """A control plane with no subworker of its own (its task module is registered), a
    short --max-wait and a 4096-byte size limit."""
    cluster.control_plane(
        "--max-wait", str(MAX_WAIT), "--max-message-size", "4096", local_concurrency=0
    )
    found = Ports(cluster)

    async def serving() -> bool:
        try:
            reply = await ask(found.results, frame(op="list_workers"))
        except pynng.NNGException:
            return False
        return bool(reply["op"] == "workers")

    await wait_until(serving, 20, "the control plane")
    return found


def assert_invalid_at(reply: dict[str, Any], path: str) -> None:
    assert reply["op"] == "error", reply
    assert (reply["code"], reply["detail"]) == ("invalid_message", {}), reply
    assert reply["message"].endswith(f"- at `{path}`"), reply


# --- wait (§5 "Bounds of `wait`") -----------------------------------------------------------


@pytest.mark.parametrize("wait", [-1.0, -1e-9, math.nan, math.inf, -math.inf, 2.6e11, 1e300])
async def test_a_wait_out_of_its_range_is_refused_alike_by_submit_get_and_get_workflow(
    ports: Ports, wait: float
) -> None:
    task = {"name": "echo", "id": "w" * 32, "args": [1]}
    asked = [
        (ports.submit, frame(op="submit", tasks=[task], wait=wait)),
        (ports.results, frame(op="get", task_ids=["w" * 32], wait=wait)),
        (ports.results, frame(op="get_workflow", workflow_id="wf", wait=wait)),
    ]
    for port, data in asked:
        assert_invalid_at(await ask(port, data), "$.wait")
    # and the refused submit queued nothing
    assert (await ask(ports.results, frame(op="get", task_ids=["w" * 32])))["results"] == [None]


async def timed(port: int, data: bytes) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    reply = await ask(port, data)
    return reply, time.monotonic() - started


async def test_a_wait_in_its_range_over_max_wait_is_clamped_to_max_wait(ports: Ports) -> None:
    # Given a task that stays scheduled and a workflow whose step stays queued (no subworker)
    later = time.time() + 3600
    scheduled = {"name": "echo", "id": "s" * 32, "args": [1], "eta": later}
    assert (await ask(ports.submit, frame(op="submit", tasks=[scheduled])))["op"] == "accepted"
    steps = [{"task": {"name": "echo", "args": [1]}}]
    await ask(ports.submit, frame(op="submit_workflow", workflow_id="wf", steps=steps))
    # When each waits far longer than --max-wait, up to the top of the range
    held = [
        (ports.submit, frame(op="submit", tasks=[{"name": "echo", "args": [1]}], wait=1e9)),
        (ports.results, frame(op="get", task_ids=["s" * 32], wait=LAST_DURATION)),
        (ports.results, frame(op="get_workflow", workflow_id="wf", wait=LAST_DURATION)),
    ]
    replies = []
    for port, data in held:
        reply, took = await timed(port, data)
        # Then each is answered once --max-wait has passed, with the state at that moment
        assert MAX_WAIT * 0.8 <= took < MAX_WAIT + 5, (reply, took)
        replies.append(reply)
    submitted, got, workflow = replies
    assert submitted["results"][0]["status"] == "queued"
    assert got["results"][0]["status"] == "scheduled"
    assert workflow["state"] == "running"


async def test_a_wait_of_zero_answers_at_once_with_results(ports: Ports) -> None:
    reply = await ask(
        ports.submit, frame(op="submit", tasks=[{"name": "echo", "args": [1]}], wait=0)
    )
    assert reply["op"] == "results"
    assert reply["results"][0]["status"] == "queued"


# --- timestamps (§3 "Values of type any") ---------------------------------------------------


def timestamp(seconds: int, nanoseconds: int) -> msgspec.msgpack.Ext:
    """A msgpack timestamp 96 (any seconds, any nanoseconds)."""
    return msgspec.msgpack.Ext(-1, struct.pack(">Iq", nanoseconds, seconds))


class RawWorker:
    """A subworker written from the spec: one REQ connection (the control plane drops a
    worker whose connection closes), one request at a time."""

    def __init__(self, ports: Ports) -> None:
        self._req = pynng.Req0(dial=f"tcp://127.0.0.1:{ports.registration}", recv_timeout=20_000)

    async def ask(self, **message: Any) -> dict[str, Any]:
        await self._req.asend(frame(worker_id=WORKER, **message))
        reply: dict[str, Any] = msgspec.msgpack.decode(await self._req.arecv())
        return reply

    async def register(self, concurrency: int = 1) -> None:
        reply = await self.ask(op="register", name="raw", concurrency=concurrency, tasks=[ECHO])
        assert reply["op"] == "registered", reply

    async def fetch(self, wait: float = 5.0, **fields: Any) -> dict[str, Any]:
        reply = await self.ask(op="fetch", wait=wait, **fields)
        assert reply["op"] == "assign", reply
        return reply

    def close(self) -> None:
        self._req.close()


@pytest.fixture
async def worker(ports: Ports) -> AsyncIterator[RawWorker]:
    raw = RawWorker(ports)
    yield raw
    raw.close()


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "nanoseconds", "arrives"),
    [
        (1, 123_456_789, EPOCH + timedelta(seconds=1, microseconds=123_457)),  # rounded,
        (1, 123_456_500, EPOCH + timedelta(seconds=1, microseconds=123_457)),  # halves up
        (1, 123_456_000, EPOCH + timedelta(seconds=1, microseconds=123_456)),  # exact
        (LAST_DURATION, 999_999_499, datetime.max.replace(tzinfo=UTC)),  # the last accepted
        (-62_135_596_800, 0, datetime.min.replace(tzinfo=UTC)),  # the first
    ],
)
async def test_a_timestamp_argument_reaches_the_subworker_rounded_to_the_microsecond(
    ports: Ports, worker: RawWorker, seconds: int, nanoseconds: int, arrives: datetime
) -> None:
    await worker.register()
    task = {"name": "echo", "args": [timestamp(seconds, nanoseconds)]}
    assert (await ask(ports.submit, frame(op="submit", tasks=[task])))["op"] == "accepted"
    (assignment,) = (await worker.fetch())["tasks"]
    assert assignment["args"] == [arrives]  # msgpack timestamps decode as datetimes


@pytest.mark.parametrize(
    ("seconds", "nanoseconds"),
    [
        (LAST_DURATION, 999_999_500),  # rounds into year 10000
        (LAST_DURATION + 1, 0),
        (-62_135_596_801, 999_999_999),  # before year 1
    ],
)
async def test_a_timestamp_outside_years_1_to_9999_is_refused_naming_the_range_and_place(
    ports: Ports, seconds: int, nanoseconds: int
) -> None:
    ts = timestamp(seconds, nanoseconds)
    task = {"name": "echo", "id": "t" * 32, "args": [ts]}
    reply = await ask(ports.submit, frame(op="submit", tasks=[task]))
    assert_invalid_at(reply, "$.tasks[0].args[0]")
    assert "from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z" in reply["message"]
    kwargs_task = {"name": "echo", "kwargs": {"value": ts}}
    assert_invalid_at(
        await ask(ports.submit, frame(op="submit", tasks=[kwargs_task])), "$.tasks[0].kwargs[...]"
    )
    assert (await ask(ports.results, frame(op="get", task_ids=["t" * 32])))["results"] == [None]


# --- the size limit (§11 "What is counted") -------------------------------------------------

LIMIT = 4096
# The largest `echo` text whose task size + 32 is exactly LIMIT - 1024 (§11's arithmetic:
# the name counts as the full name `it_tasks.echo`, 14 bytes, whatever name is sent).
LARGEST_TEXT = LIMIT - 1024 - 32 - (75 + 14 + 1 + 1 + 1 + 5) - (1 + 3)


def padded(total: int, **message: Any) -> bytes:
    """``message`` grown to exactly ``total`` bytes by an unknown field (ignored, counted)."""
    pad = 0
    while len(data := frame(**message, pad="p" * pad)) < total:
        pad += 1
    assert len(data) == total
    return data


async def test_a_message_of_exactly_the_limit_is_served_and_one_byte_more_is_oversize(
    ports: Ports,
) -> None:
    served = await ask(ports.results, padded(LIMIT, op="get", task_ids=["x"]))
    assert served == {"op": "results", "v": 1, "auth": None, "results": [None]}
    over = await ask(ports.results, padded(LIMIT + 1, op="get", task_ids=["x"]))
    assert (over["op"], over["code"], over["detail"]) == ("error", "oversize", {})


async def test_a_task_exactly_at_the_size_bound_is_accepted_and_one_byte_over_is_oversize(
    ports: Ports,
) -> None:
    def echo(name: str, length: int) -> bytes:
        return frame(op="submit", tasks=[{"name": name, "args": ["z" * length]}])

    for name in ("echo", "it_tasks.echo"):  # a short name counts as the full one
        accepted = await ask(ports.submit, echo(name, LARGEST_TEXT))
        assert accepted["op"] == "accepted", accepted
        refused = await ask(ports.submit, echo(name, LARGEST_TEXT + 1))
        assert (refused["code"], refused["detail"]) == (
            "oversize",
            {"index": 0, "task_name": "it_tasks.echo"},
        )
        expected = "task of 3073 bytes cannot be dispatched in a 4096-byte message"
        assert refused["message"] == expected


# --- capacity, prefetch and in_flight (§7 fetch, §8 WorkerInfo) ------------------------------


async def in_flight(ports: Ports) -> int:
    (info,) = (await ask(ports.results, frame(op="list_workers")))["workers"]
    count: int = info["in_flight"]
    return count


def done(task_id: str, seconds: float = 0.001) -> dict[str, Any]:
    now = time.time()
    return {"task_id": task_id, "ok": True, "started_at": now, "finished_at": now + seconds}


async def test_prefetch_room_takes_only_tasks_measured_as_quick_and_in_flight_counts_held_ones(
    ports: Ports, worker: RawWorker
) -> None:
    # Given a worker with one slot and five queued tasks of a name never measured
    await worker.register(concurrency=1)
    ids = [f"{n:032x}" for n in range(5)]
    tasks = [{"name": "echo", "id": task_id, "args": [n]} for n, task_id in enumerate(ids)]
    assert (await ask(ports.submit, frame(op="submit", tasks=tasks)))["op"] == "accepted"
    # When it fetches: its one free slot is filled
    assert [t["id"] for t in (await worker.fetch())["tasks"]] == ids[:1]
    # And a fetch raising prefetch gets nothing while the name is not known to be quick
    assert (await worker.fetch(wait=0.3, prefetch=3))["tasks"] == []
    assert await in_flight(ports) == 1
    # When an outcome shows the name quick, the same prefetch fills slot and buffer
    refill = await worker.fetch(prefetch=3, outcomes=[done(ids[0])])
    assert [t["id"] for t in refill["tasks"]] == ids[1:5]  # concurrency 1 + prefetch 3
    # Then in_flight counts every task handed over and not reported finished,
    # `assigned` and `running` alike, cancelled ones too until their outcome comes
    assert await in_flight(ports) == 4
    assert (await worker.ask(op="report", started=ids[1:3]))["op"] == "ack"
    assert await in_flight(ports) == 4
    cancelled = await ask(ports.results, frame(op="cancel", task_id=ids[4]))
    assert cancelled["changed"] is True
    assert (await worker.fetch(prefetch=3))["cancel"] == [ids[4]]
    assert await in_flight(ports) == 4
    assert (await worker.ask(op="report", outcomes=[done(ids[1])]))["op"] == "ack"
    assert await in_flight(ports) == 3
    cancel_outcome = {**done(ids[4]), "ok": False}
    cancel_outcome["error"] = {"type": "Cancelled", "message": "", "reason": "cancelled"}
    assert (await worker.ask(op="report", outcomes=[cancel_outcome]))["op"] == "ack"
    assert await in_flight(ports) == 2
