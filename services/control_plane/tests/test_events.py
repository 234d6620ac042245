"""The event bus: every transition is published; a slow subscriber loses events, counted,
and slows nothing."""

from __future__ import annotations

import asyncio

import pytest

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.board_types import Change
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.events import EventBus, TooManySubscriptions
from fastworker_protocol import Outcome, Param, Priority, TaskSignature, TaskSpec, TaskState

ADD = TaskSignature(name="add", params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])


def change(state: TaskState, task_id: str = "t") -> Change:
    return Change(state, task_id, "add", None, 0)


async def test_each_subscriber_gets_every_event_in_order() -> None:
    bus = EventBus()
    first, second = bus.subscribe(), bus.subscribe()
    bus.publish([change(TaskState.QUEUED), change(TaskState.SUCCESS)], at=5.0)
    for subscription in (first, second):
        kinds = [(await subscription.get()).kind for _ in range(2)]
        assert kinds == ["task.queued", "task.success"]
    assert (bus.published, bus.dropped) == (2, 0)


async def test_a_full_subscriber_drops_new_events_and_they_are_counted() -> None:
    bus = EventBus()
    slow, fast = bus.subscribe(backlog=1), bus.subscribe()
    bus.publish([change(TaskState.QUEUED, f"t{i}") for i in range(3)], at=1.0)
    assert (slow.dropped, fast.dropped, bus.dropped) == (2, 0, 2)
    assert (await slow.get()).task_id == "t0"
    slow.close()
    assert bus.has_subscribers  # the fast one is still there
    fast.close()
    assert not bus.has_subscribers


async def test_a_task_lifetime_is_published_transition_by_transition() -> None:
    engine = Engine(TaskBoard(), heartbeat_timeout=10, clock=lambda: 1000.0)
    engine.board.register("w", "w", 2, [ADD], 1000.0)
    events = engine.subscribe()
    engine.submit([TaskSpec(name="add", id="t", args=[1])], Priority.NORMAL)
    reply = await asyncio.wait_for(engine.assign("w", 5), 2)
    engine.report("w", ["t"], [Outcome(task_id="t", ok=True, result=2)])
    seen = [await asyncio.wait_for(events.get(), 2) for _ in range(4)]
    assert [e.kind for e in seen] == [
        "task.queued",
        "task.assigned",
        "task.running",
        "task.success",
    ]
    assert [a.id for a in reply.tasks] == ["t"]
    assert seen[1].worker_id == "w"
    assert {e.task_id for e in seen} == {"t"}


async def test_without_subscribers_the_board_records_nothing() -> None:
    engine = Engine(TaskBoard(), heartbeat_timeout=10, clock=lambda: 1000.0)
    engine.board.learn_tasks([ADD])
    assert not engine.outbox.recording  # the engine asks the board for no transitions
    engine.submit([TaskSpec(name="add", id="t", args=[1])], Priority.NORMAL)
    await asyncio.sleep(0)
    assert engine.events.published == 0


def test_subscriptions_past_the_bound_are_refused_until_one_closes() -> None:
    bus = EventBus(max_subscriptions=2)
    first, _ = bus.subscribe(), bus.subscribe()

    with pytest.raises(TooManySubscriptions, match="--max-event-streams"):
        bus.subscribe()
    first.close()
    bus.subscribe()

    assert bus.subscriptions == 2


def test_queued_events_are_counted_over_every_subscription() -> None:
    bus = EventBus()
    bus.subscribe(backlog=1), bus.subscribe(backlog=10)

    bus.publish([change(TaskState.QUEUED), change(TaskState.SUCCESS)], at=5.0)

    assert bus.queued == 1 + 2
