"""The engine holds fetches and waits around a real TaskBoard and answers them when the board
changes, on a fake clock: no sockets, no sleeping."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.workers import Delivery
from fastworker_control_plane.engine import Engine
from fastworker_protocol import (
    Assignment,
    ErrorCode,
    Outcome,
    Param,
    Priority,
    TaskSignature,
    TaskSpec,
    TaskState,
)

HEARTBEAT_TIMEOUT = 10.0
ADD = TaskSignature(name="add", params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])
MUL = TaskSignature(name="mul", params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def engine(clock: FakeClock) -> AsyncIterator[Engine]:
    engine = Engine(TaskBoard(), heartbeat_timeout=HEARTBEAT_TIMEOUT, clock=clock)
    yield engine
    engine.close()
    await settle()  # let a dispatch the test scheduled run before the loop closes


def register(engine: Engine, worker_id: str, *tasks: TaskSignature) -> None:
    engine.board.register(worker_id, f"host-{worker_id}", 4, tasks or (ADD,), engine.clock())


def submit(engine: Engine, *task_ids: str) -> None:
    engine.submit([TaskSpec(name="add", id=t, args=[1]) for t in task_ids], Priority.NORMAL)


async def settle() -> None:  # a few loop turns, so a kicked dispatch has run
    for _ in range(3):
        await asyncio.sleep(0)


async def holding(coro: Any) -> asyncio.Task[Any]:
    """Start a request and return once it is held by the engine."""
    request = asyncio.create_task(coro)
    await settle()
    assert not request.done()
    return request


async def answer(request: asyncio.Task[Any]) -> Any:
    return await asyncio.wait_for(request, 2)


def ids(delivery: Delivery | list[Assignment]) -> list[str]:
    tasks = delivery.tasks if isinstance(delivery, Delivery) else delivery
    return [a.id for a in tasks]


def status(engine: Engine, task_id: str) -> TaskState:
    result = engine.lookup(task_id)
    assert result is not None
    return result.status


async def test_a_held_fetch_is_answered_as_soon_as_a_task_arrives(engine: Engine) -> None:
    register(engine, "w1")
    fetch = await holding(engine.fetch("w1", 60))

    submit(engine, "t1")

    assert ids(await answer(fetch)) == ["t1"]
    assert status(engine, "t1") == TaskState.ASSIGNED


async def test_a_fetch_with_no_work_is_answered_empty_after_its_wait(engine: Engine) -> None:
    register(engine, "w1")

    assert await asyncio.wait_for(engine.fetch("w1", 0.01), 2) == Delivery()

    submit(engine, "t1")
    await settle()
    assert status(engine, "t1") == TaskState.QUEUED


async def test_a_second_fetch_from_a_worker_answers_its_first_empty(engine: Engine) -> None:
    register(engine, "w1")
    first = await holding(engine.fetch("w1", 60))
    second = asyncio.create_task(engine.fetch("w1", 60))

    assert await answer(first) == Delivery()

    submit(engine, "t1")
    assert ids(await answer(second)) == ["t1"]


async def test_drain_answers_the_held_fetch_empty_and_the_worker_gets_no_more(
    engine: Engine,
) -> None:
    register(engine, "w1")
    fetch = await holding(engine.fetch("w1", 60))

    engine.drain("w1")
    assert await answer(fetch) == Delivery()

    submit(engine, "t1")
    assert await asyncio.wait_for(engine.fetch("w1", 0.01), 2) == Delivery()
    assert status(engine, "t1") == TaskState.QUEUED


async def test_a_removed_workers_task_is_requeued_and_its_waiter_sees_it_finish_elsewhere(
    engine: Engine,
) -> None:
    register(engine, "w1")
    register(engine, "w2")
    submit(engine, "t1")
    assert ids(await asyncio.wait_for(engine.fetch("w1", 60), 2)) == ["t1"]
    waiter = await holding(engine.wait(["t1"], 60))

    engine.remove_worker("w1", "test")
    assert status(engine, "t1") == TaskState.QUEUED
    [again] = (await asyncio.wait_for(engine.fetch("w2", 60), 2)).tasks
    assert (again.id, again.attempt) == ("t1", 2)
    assert not waiter.done()

    engine.report("w2", ["t1"], [Outcome(task_id="t1", ok=True, result=3)])

    [result] = await answer(waiter)
    assert result is not None
    assert (result.status, result.result, result.worker_id) == (TaskState.SUCCESS, 3, "w2")


async def test_maintain_removes_a_silent_worker_but_not_one_whose_fetch_is_held(
    engine: Engine, clock: FakeClock
) -> None:
    register(engine, "silent", ADD)
    register(engine, "held", MUL)
    submit(engine, "t1")
    assert ids(await asyncio.wait_for(engine.fetch("silent", 60), 2)) == ["t1"]
    fetch = await holding(engine.fetch("held", 60))

    clock.now += HEARTBEAT_TIMEOUT - 1
    engine.maintain()
    assert engine.board.workers.get("silent") is not None

    clock.now += 2
    engine.maintain()

    assert engine.board.workers.get("silent") is None
    assert engine.board.workers.get("held") is not None
    assert status(engine, "t1") == TaskState.QUEUED
    assert not fetch.done()
    engine.close()
    assert await answer(fetch) == Delivery()


async def test_a_closed_pipe_removes_only_the_workers_last_seen_on_it(engine: Engine) -> None:
    for worker_id in ("w1", "w2", "w3"):
        register(engine, worker_id)
    engine.seen("w1", 1)
    engine.seen("w2", 2)
    engine.seen("w3", 1)
    engine.seen("w3", 3)  # w3 reconnected on another pipe
    submit(engine, "t1")
    assert ids(await asyncio.wait_for(engine.fetch("w1", 60), 2)) == ["t1"]

    engine.pipe_closed(1)

    assert sorted(w.worker_id for w in engine.board.workers) == ["w2", "w3"]
    assert status(engine, "t1") == TaskState.QUEUED


async def test_wait_returns_the_final_result_as_soon_as_a_report_finishes_the_task(
    engine: Engine,
) -> None:
    register(engine, "w1")
    submit(engine, "t1")
    await asyncio.wait_for(engine.fetch("w1", 60), 2)
    waiter = await holding(engine.wait(["t1", "unknown"], 60))

    engine.report("w1", ["t1"], [Outcome(task_id="t1", ok=False)])

    result, unknown = await answer(waiter)
    assert result is not None
    assert (result.status, unknown) == (TaskState.FAILURE, None)


async def test_close_answers_held_waits_with_shutting_down_and_held_fetches_empty(
    engine: Engine,
) -> None:
    engine.board.learn_tasks([ADD])
    register(engine, "w1", MUL)  # so t1 stays queued and the fetch stays held
    submit(engine, "t1")
    waiter = await holding(engine.wait(["t1"], 60))
    fetch = await holding(engine.fetch("w1", 60))

    engine.close()

    with pytest.raises(Rejected) as rejected:
        await answer(waiter)
    assert rejected.value.code == ErrorCode.SHUTTING_DOWN
    assert await answer(fetch) == Delivery()


async def test_cancelling_a_queued_task_finishes_its_waiter_as_cancelled(engine: Engine) -> None:
    register(engine, "w1")
    submit(engine, "t1")
    waiter = await holding(engine.wait(["t1"], 60))

    result, changed = engine.cancel("t1")

    assert changed
    assert result.status == TaskState.CANCELLED
    [final] = await answer(waiter)
    assert final is not None
    assert final.status == TaskState.CANCELLED


async def test_a_fetch_cancelled_as_a_task_arrives_does_not_swallow_the_task(
    engine: Engine,
) -> None:
    register(engine, "w1")
    fetch = await holding(engine.fetch("w1", 60))

    submit(engine, "t1")  # dispatch is now due at the end of this loop turn
    fetch.cancel()  # e.g. the server abandons the request in the same turn
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(fetch, 2)

    assert status(engine, "t1") == TaskState.QUEUED
    assert ids(await asyncio.wait_for(engine.fetch("w1", 60), 2)) == ["t1"]
