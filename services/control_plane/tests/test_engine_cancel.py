"""Cancelling a task a subworker holds: the subworker is told through its fetch replies."""

from __future__ import annotations

import asyncio

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.engine import Engine
from fastworker_protocol import Param, Priority, TaskSignature, TaskSpec, TaskState

ADD = TaskSignature(name="add", params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])


def engine_with_worker() -> Engine:
    engine = Engine(TaskBoard(), heartbeat_timeout=10, clock=lambda: 1000.0)
    engine.board.register("w", "w", 2, [ADD], 1000.0)
    return engine


async def test_a_held_fetch_is_answered_at_once_with_the_cancelled_task() -> None:
    engine = engine_with_worker()
    engine.submit([TaskSpec(name="add", id="t", args=[1])], Priority.NORMAL)
    first = await asyncio.wait_for(engine.assign("w", 5), 2)
    assert [a.id for a in first.tasks] == ["t"]
    held = asyncio.ensure_future(engine.assign("w", 60))
    await asyncio.sleep(0)
    assert not held.done()
    result, changed = engine.cancel("t")
    assert (result.status, changed) == (TaskState.CANCELLED, True)
    reply = await asyncio.wait_for(held, 2)
    assert (reply.tasks, reply.cancel) == ([], ["t"])


async def test_a_cancel_with_no_fetch_held_goes_in_the_next_reply_without_waiting() -> None:
    engine = engine_with_worker()
    engine.submit([TaskSpec(name="add", id="t", args=[1])], Priority.NORMAL)
    await asyncio.wait_for(engine.assign("w", 5), 2)
    engine.cancel("t")
    reply = await asyncio.wait_for(engine.assign("w", 60), 2)
    assert reply.cancel == ["t"]
    assert (await asyncio.wait_for(engine.assign("w", 0.01), 2)).cancel == []


async def test_cancelling_a_queued_task_tells_no_worker() -> None:
    engine = Engine(TaskBoard(), heartbeat_timeout=10, clock=lambda: 1000.0)
    engine.board.learn_tasks([ADD])
    engine.submit([TaskSpec(name="add", id="q", args=[1])], Priority.NORMAL)
    engine.board.register("w", "w", 2, [ADD], 1000.0)
    engine.cancel("q")
    reply = await asyncio.wait_for(engine.assign("w", 0.01), 2)
    assert (reply.tasks, reply.cancel) == ([], [])
