"""Dead letters through the engine and the results port's handler: list, retry and purge
reply as the protocol says, operators' actions are noted (with their source), a retried
task is dispatched, and the ``fastworker_dead_letters`` gauge counts the store. A task
that keeps no result (``result_ttl=0``) still answers whoever waits for it."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.metrics import ControlPlaneCollector
from fastworker_control_plane.servers.results import SERVES, ResultsHandler
from fastworker_protocol import (
    Cancel,
    ErrorCode,
    FailedFilter,
    FailedList,
    FailedPurged,
    FailedRetried,
    ListFailed,
    Outcome,
    Param,
    Priority,
    PurgeFailed,
    QueueAction,
    RetryFailed,
    SetLimit,
    TaskError,
    TaskSignature,
    TaskSpec,
)

NOW = 1000.0
ADD = TaskSignature(name="add", params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])


def engine_with_letters(*task_ids: str) -> Engine:
    engine = Engine(TaskBoard(), heartbeat_timeout=10, clock=lambda: NOW)
    board = engine.board
    board.register("w", "w", 100, [ADD], NOW)
    board.submit([TaskSpec(name="add", id=t, args=[t]) for t in task_ids], Priority.NORMAL, NOW)
    board.dispatch(["w"], NOW)
    error = TaskError(type="KeyError", message="k")
    board.report("w", [], [Outcome(task_id=t, ok=False, error=error) for t in task_ids], NOW)
    return engine


async def test_the_results_port_lists_retries_and_purges_dead_letters() -> None:
    engine = engine_with_letters("a", "b", "c")
    handler = ResultsHandler(engine, max_wait=1)
    assert {ListFailed, RetryFailed, PurgeFailed} <= set(SERVES)

    listed = await handler(ListFailed(filter=FailedFilter(error_type="KeyError"), limit=2), 0)
    assert isinstance(listed, FailedList)
    assert ([t.task_id for t in listed.tasks], listed.total, listed.stored) == (["c", "b"], 3, 3)

    retried = await handler(RetryFailed(filter=FailedFilter(task_ids=["a"])), 0)
    assert isinstance(retried, FailedRetried)
    [one] = retried.retried
    purged = await handler(PurgeFailed(filter=FailedFilter(), all_matching=True), 0)
    assert isinstance(purged, FailedPurged)
    assert purged.purged == 2

    # The retried task goes out to the worker, linked to its dead letter
    assignment = await asyncio.wait_for(engine.assign("w", 1), 2)
    assert [a.id for a in assignment.tasks] == [one.new_task_id]
    actions = [(a.kind, a.target, a.source, a.detail) for a in engine.actions.since(0)]
    assert actions == [
        ("failed.retry", "a", "client", {"count": 1}),
        ("failed.purge", "", "client", {"count": 2}),
    ]


async def test_a_selection_of_nothing_in_particular_is_refused() -> None:
    engine = engine_with_letters("a")

    for act in (engine.operations.retry_failed, engine.operations.purge_failed):
        with pytest.raises(Rejected) as refused:
            act(FailedFilter(task_name="add"), False, "http")
        assert refused.value.code == ErrorCode.INVALID_MESSAGE
    assert len(engine.board.dead_letters) == 1
    assert engine.actions.since(0) == []


async def test_cancel_queue_and_limit_controls_are_noted_as_clients_actions() -> None:
    engine = Engine(TaskBoard(), heartbeat_timeout=10, clock=lambda: NOW)
    engine.board.register("w", "w", 1, [ADD], NOW)
    engine.board.submit([TaskSpec(name="add", id="t", args=[1])], Priority.NORMAL, NOW)
    handler = ResultsHandler(engine, max_wait=1)

    await handler(Cancel(task_id="t"), 0)
    await handler(Cancel(task_id="t"), 0)  # changes nothing: not noted
    await handler(QueueAction(queue="default", action="pause"), 0)
    await handler(QueueAction(queue="default", action="purge"), 0)
    await handler(SetLimit(scope="task", name="add", concurrency_limit=2), 0)

    actions = [(a.kind, a.target, a.source) for a in engine.actions.since(0)]
    assert actions == [
        ("task.cancel", "t", "client"),
        ("queue.pause", "default", "client"),
        ("queue.purge", "default", "client"),
        ("limit.set", "add", "client"),
    ]


def test_the_dead_letter_gauge_counts_the_store() -> None:
    engine = engine_with_letters("a", "b")
    registry = CollectorRegistry()
    registry.register(ControlPlaneCollector(engine))

    text = generate_latest(registry).decode()

    assert "# TYPE fastworker_dead_letters gauge" in text
    assert "\nfastworker_dead_letters 2.0\n" in text


async def test_a_client_waiting_for_a_task_that_keeps_no_result_still_gets_it() -> None:
    engine = Engine(TaskBoard(), heartbeat_timeout=10, clock=lambda: NOW)
    engine.board.register("w", "w", 1, [TaskSignature(name="secret", result_ttl=0.0)], NOW)
    engine.submit([TaskSpec(name="secret", id="s")], Priority.NORMAL)
    waiting = asyncio.ensure_future(engine.wait(["s"], 5))
    await asyncio.sleep(0)
    engine.board.dispatch(["w"], NOW)

    engine.report("w", [], [Outcome(task_id="s", ok=True, result=42)])

    [result] = await asyncio.wait_for(waiting, 2)
    assert result is not None
    assert result.result == 42
    assert engine.lookup("s") is None  # a later read: unknown, as an expired result
