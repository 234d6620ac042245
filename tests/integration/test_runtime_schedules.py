"""Schedules made at run time, on real processes: a schedule with arguments runs once per
tick however many subworkers could run it, survives a control-plane restart on its
journal, and stops when removed; bad ones get clear error replies. Declared periodic
tasks run at the priority they declare.

The requests are sent raw (the protocol's codec over pynng, as PROTOCOL.md describes
them), so these tests hold for any client; listings use the SDK.
"""

from __future__ import annotations

import asyncio
import json
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec
import pynng
from harness import Cluster, Proc, wait_until

from fastworker import Client
from fastworker_protocol import (
    AddSchedule,
    Codec,
    Error,
    ErrorCode,
    Message,
    RemoveSchedule,
    ScheduleAdded,
    ScheduleRemoved,
    ScheduleSpec,
)

INTERVAL = 0.5
MODULES = ("--task-modules", "it_tasks", "it_schedules")
CODEC = Codec()


async def request(cluster: Cluster, message: Message) -> Message:
    """One request on the results port (base + 4), its reply decoded."""
    address = f"tcp://127.0.0.1:{cluster.base_port + 4}"
    with pynng.Req0(dial=address, async_backend="asyncio") as sock:
        context = sock.new_context()
        try:
            await context.asend(CODEC.encode(message))
            return CODEC.decode(await asyncio.wait_for(context.arecv(), 10))
        finally:
            context.close()


def report_schedule(runs: Path, name: str = "acme-report", **fields: Any) -> ScheduleSpec:
    """``remember(runs, "acme", fmt="csv")`` every ``INTERVAL`` seconds."""
    defaults: dict[str, Any] = {
        "task": "remember",
        "args": [str(runs), "acme"],
        "kwargs": {"fmt": "csv"},
        "interval": INTERVAL,
    }
    return ScheduleSpec(name=name, **{**defaults, **fields})


def ran(runs: Path) -> list[dict[str, Any]]:
    """The runs ``remember`` noted, in the order they ran."""
    if not runs.exists():
        return []
    return [json.loads(line) for line in runs.read_text().splitlines() if line]


def due_times(ids: set[str], name: str = "acme-report") -> list[float]:
    """The due times run ids (``NAME@DUE``) name, in order."""
    assert all(i.startswith(f"{name}@") for i in ids), ids
    return sorted(float(i.rpartition("@")[2]) for i in ids)


def one_per_tick(dues: list[float]) -> bool:
    """Consecutive due times are whole intervals apart: never two runs for one tick."""
    return all(later - earlier >= INTERVAL - 0.002 for earlier, later in pairwise(dues))


def start_cluster(cluster: Cluster, *extra: str) -> Proc:
    """A control plane that only dispatches, and two subworkers that run ``remember``."""
    plane = cluster.control_plane(*MODULES, *extra, local_concurrency=0)
    for _ in range(2):
        cluster.subworker(*MODULES)
    return plane


async def times_run(client: Client, name: str = "acme-report") -> int:
    return sum(s.times_run for s in await client.list_schedules() if s.name == name)


async def test_a_run_time_schedule_with_arguments_runs_once_per_tick_on_two_subworkers(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a control plane that only dispatches, and two subworkers that could each run it
    runs = tmp_path / "runs.jsonl"
    start_cluster(cluster)
    async with cluster.client() as client:
        await cluster.workers(client, 2)

        # When a schedule running remember("acme", fmt="csv") every half second is added
        added = await request(cluster, AddSchedule(schedule=report_schedule(runs)))
        started = time.monotonic()

        async def six_runs() -> bool:
            return len(ran(runs)) >= 6

        await wait_until(six_runs, 20, "six runs of the schedule")
        elapsed = time.monotonic() - started
        [schedule] = await client.list_schedules()
        listed = [
            t for t in await client.list_tasks(limit=1000) if t.name == "it_schedules.remember"
        ]

    # Then it was made, and each tick ran it once, with its arguments
    assert isinstance(added, ScheduleAdded), added
    assert added.created
    assert (added.schedule.source, added.schedule.task, added.schedule.spec) == (
        "runtime",
        "it_schedules.remember",  # added as remember: kept under its full name
        "every 0.5 s",
    )
    lines = ran(runs)
    ids = [line["id"] for line in lines]
    assert len(set(ids)) == len(ids), ids  # no run twice
    assert one_per_tick(due_times(set(ids))), ids  # no tick run twice
    assert {(line["customer"], line["fmt"]) for line in lines} == {("acme", "csv")}
    assert {line["priority"] for line in lines} == {"normal"}
    assert len(listed) == schedule.times_run  # one task per tick, not one per subworker
    assert len(lines) <= schedule.times_run <= elapsed / INTERVAL + 2
    assert (schedule.source, schedule.args, schedule.kwargs) == (
        "runtime",
        [str(runs), "acme"],
        {"fmt": "csv"},
    )


async def test_a_run_time_schedule_survives_a_control_plane_restart(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a durable control plane whose run-time schedule has run three times
    runs = tmp_path / "runs.jsonl"
    state = tmp_path / "state"
    plane = start_cluster(cluster, "--state-dir", str(state))
    spec = report_schedule(runs, priority="high")
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        assert isinstance(await request(cluster, AddSchedule(schedule=spec)), ScheduleAdded)

        async def three_runs() -> bool:
            return len(ran(runs)) >= 3

        await wait_until(three_runs, 20, "three runs before the restart")

    # When the control plane restarts on its journal
    plane.stop()
    before = len({line["id"] for line in ran(runs)})
    cluster.control_plane(*MODULES, "--state-dir", str(state), local_concurrency=0)
    async with cluster.client() as client:
        [restored] = await client.list_schedules()
        await cluster.workers(client, 2, timeout=30)

        # Then it is there as it was defined, its count carried on, and it keeps ticking
        async def three_more_runs() -> bool:
            return len({line["id"] for line in ran(runs)}) >= before + 3

        await wait_until(three_more_runs, 30, "three runs after the restart")
        [schedule] = await client.list_schedules()

    assert (restored.name, restored.source, restored.task, restored.priority) == (
        "acme-report",
        "runtime",
        "it_schedules.remember",
        "high",
    )
    assert (restored.args, restored.kwargs) == ([str(runs), "acme"], {"fmt": "csv"})
    assert restored.times_run >= before
    assert schedule.times_run >= before + 3
    lines = ran(runs)
    assert one_per_tick(due_times({line["id"] for line in lines}))
    assert {(line["customer"], line["fmt"], line["priority"]) for line in lines} == {
        ("acme", "csv", "high")
    }


async def test_a_removed_schedule_runs_no_more(cluster: Cluster, tmp_path: Path) -> None:
    # Given a run-time schedule that has run twice
    runs = tmp_path / "runs.jsonl"
    marker = tmp_path / "marker.jsonl"
    start_cluster(cluster)
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        await request(cluster, AddSchedule(schedule=report_schedule(runs)))

        async def two_runs() -> bool:
            return len(ran(runs)) >= 2

        await wait_until(two_runs, 20, "two runs")

        # When it is removed
        removed = await request(cluster, RemoveSchedule(name="acme-report"))
        removed_at = time.time()
        listed = await client.list_schedules()
        # ... and three intervals pass: a task delayed that long has run
        waited = await client.delay("remember", str(marker), "marker", countdown=3 * INTERVAL)
        await client.wait(waited, timeout=20)
        again = await request(cluster, RemoveSchedule(name="acme-report"))
        tasks = [
            t for t in await client.list_tasks(limit=1000) if t.name == "it_schedules.remember"
        ]

    # Then no tick came due after its removal, and it is gone from the listing
    assert removed == ScheduleRemoved(name="acme-report", removed=True)
    assert again == ScheduleRemoved(name="acme-report", removed=False)
    assert listed == []
    ids = {line["id"] for line in ran(runs)}
    assert max(due_times(ids)) <= removed_at
    assert {t.task_id for t in tasks} == {*ids, waited}  # every run queued has run
    assert [line["customer"] for line in ran(marker)] == ["marker"]


EVERY_SECOND = "it_periodic.every_second"  # a declared schedule is named by its task


async def test_bad_schedules_get_clear_error_replies(cluster: Cluster, tmp_path: Path) -> None:
    # Given a control plane that runs remember and the declared periodic every_second
    cluster.control_plane("--task-modules", "it_tasks", "it_schedules", "it_periodic")
    runs = tmp_path / "runs.jsonl"
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        # When bad schedules are added, and a declared one removed
        asked = {
            "unknown task": AddSchedule(schedule=report_schedule(runs, task="nope")),
            "bad cron": AddSchedule(
                schedule=report_schedule(runs, interval=None, cron="61 * * * *")
            ),
            "both": AddSchedule(schedule=report_schedule(runs, cron="* * * * *")),
            "neither": AddSchedule(schedule=report_schedule(runs, interval=None)),
            "bad zone": AddSchedule(
                schedule=report_schedule(runs, interval=None, cron="0 9 * * 1", tz="Mars/X")
            ),
            "bad arguments": AddSchedule(schedule=report_schedule(runs, args=[])),
            "declared name": AddSchedule(schedule=report_schedule(runs, name=EVERY_SECOND)),
            "remove declared": RemoveSchedule(name=EVERY_SECOND),
        }
        replies = {what: await request(cluster, message) for what, message in asked.items()}
        unknown = await request(cluster, RemoveSchedule(name="never-made"))
        schedules = await client.list_schedules()

    # Then each gets an error reply saying what is wrong, and nothing was made
    expected = {
        "unknown task": (ErrorCode.UNKNOWN_TASK, "no subworker has registered a task named 'nope'"),
        "bad cron": (ErrorCode.INVALID_MESSAGE, "bad cron expression '61 * * * *'"),
        "both": (ErrorCode.INVALID_MESSAGE, "give exactly one of interval and cron"),
        "neither": (ErrorCode.INVALID_MESSAGE, "give exactly one of interval and cron"),
        "bad zone": (ErrorCode.INVALID_MESSAGE, "unknown time zone 'Mars/X'"),
        "bad arguments": (ErrorCode.INVALID_ARGUMENTS, "missing a required argument"),
        "declared name": (ErrorCode.INVALID_MESSAGE, "cannot be taken by a run-time schedule"),
        "remove declared": (ErrorCode.INVALID_MESSAGE, "cannot be removed here"),
    }
    for what, (code, words) in expected.items():
        reply = replies[what]
        assert isinstance(reply, Error), (what, reply)
        assert reply.code == code, (what, reply)
        assert words in reply.message, (what, reply)
    assert unknown == ScheduleRemoved(name="never-made", removed=False)
    assert [(s.name, s.source) for s in schedules] == [(EVERY_SECOND, "declared")]


async def test_a_declared_periodic_task_runs_at_the_priority_it_declares(
    cluster: Cluster,
) -> None:
    # Given a subworker (written against PROTOCOL.md) declaring a high-priority periodic task
    cluster.control_plane(local_concurrency=0)
    registration = f"tcp://127.0.0.1:{cluster.base_port + 5}"
    with pynng.Req0(dial=registration, async_backend="asyncio") as sock:
        registered = await raw_call(
            sock,
            {
                "op": "register",
                "worker_id": "raw-1",
                "name": "raw",
                "concurrency": 1,
                "tasks": [{"name": "urgent", "repeat_interval": INTERVAL, "priority": "high"}],
            },
        )
        assert registered["op"] == "registered", registered

        # When its first tick is handed out
        task = await first_task(sock)
        await raw_call(
            sock,
            {
                "op": "report",
                "worker_id": "raw-1",
                "outcomes": [{"task_id": task["id"], "ok": True}],
            },
        )
        async with cluster.client() as client:
            [schedule] = await client.list_schedules()
            result = await client.get_task_result(task["id"])

    # Then it runs at high priority
    assert (task["name"], task["priority"]) == ("urgent", "high")
    assert task["id"].startswith("urgent@")
    assert (schedule.name, schedule.source, schedule.priority) == ("urgent", "declared", "high")
    assert result is not None
    assert result.priority == "high"


async def raw_call(sock: pynng.Req0, message: dict[str, Any]) -> dict[str, Any]:
    context = sock.new_context()
    try:
        await context.asend(msgspec.msgpack.encode({"v": 1, **message}))
        reply: dict[str, Any] = msgspec.msgpack.decode(await asyncio.wait_for(context.arecv(), 10))
    finally:
        context.close()
    return reply


async def first_task(sock: pynng.Req0, timeout: float = 10.0) -> dict[str, Any]:
    """Fetch until a task is handed out (the fetch itself waits for one)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = await raw_call(sock, {"op": "fetch", "worker_id": "raw-1", "wait": 1.0})
        assert reply["op"] == "assign", reply
        if reply["tasks"]:
            task: dict[str, Any] = reply["tasks"][0]
            return task
    raise AssertionError(f"no task handed out in {timeout} s")
