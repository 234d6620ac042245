"""``current_task()``: each running task sees its own attempt, and nothing leaks out."""

from __future__ import annotations

import asyncio

import pytest

from fastworker import TaskContext, TaskRegistry, current_task, task
from fastworker_protocol import Assignment, Priority
from fastworker_subworker.executor import Executor


@pytest.fixture
def registry() -> TaskRegistry:
    registry = TaskRegistry()

    @task(name="sync_context", registry=registry)  # short names for the tests
    def sync_context() -> dict[str, object]:
        return _described(current_task())

    @task(name="async_context", registry=registry)  # short names for the tests
    async def async_context(pause: float) -> dict[str, object]:
        await asyncio.sleep(pause)  # another task runs meanwhile, with its own context
        return _described(current_task())

    @task(name="failing", registry=registry)  # short names for the tests
    def failing() -> None:
        raise RuntimeError("boom")

    return registry


def _described(context: TaskContext | None) -> dict[str, object]:
    assert context is not None
    return {
        "id": context.id,
        "name": context.name,
        "attempt": context.attempt,
        "priority": None if context.priority is None else str(context.priority),
        "queue": context.queue,
        "eta": context.eta,
        "headers": dict(context.headers),
    }


def test_a_sync_task_sees_its_own_assignment(registry: TaskRegistry) -> None:
    assignment = Assignment(
        id="t1",
        name="sync_context",
        attempt=3,
        priority=Priority.HIGH,
        queue="reports",
        eta=1_700_000_000.0,
        headers={"traceparent": "00-abc"},
    )
    outcome = Executor(registry).run_sync(assignment)
    assert outcome.ok, outcome.error
    assert outcome.result == {
        "id": "t1",
        "name": "sync_context",
        "attempt": 3,
        "priority": "high",
        "queue": "reports",
        "eta": 1_700_000_000.0,
        "headers": {"traceparent": "00-abc"},
    }
    assert current_task() is None  # nothing is left set once it returned


def test_a_failing_task_leaves_no_context_behind(registry: TaskRegistry) -> None:
    outcome = Executor(registry).run_sync(Assignment(id="t2", name="failing"))
    assert not outcome.ok
    assert current_task() is None


async def test_async_tasks_running_at_once_each_see_their_own(registry: TaskRegistry) -> None:
    executor = Executor(registry)
    first, second = await asyncio.gather(
        executor.run_async(Assignment(id="a", name="async_context", args=[0.02], attempt=1)),
        executor.run_async(Assignment(id="b", name="async_context", args=[0.01], attempt=2)),
    )
    assert (first.result["id"], first.result["attempt"]) == ("a", 1)
    assert (second.result["id"], second.result["attempt"]) == ("b", 2)
    assert current_task() is None


def test_outside_a_task_there_is_none_and_a_direct_call_runs_without_one(
    registry: TaskRegistry,
) -> None:
    assert current_task() is None
    sync_context = registry.get("sync_context")
    assert sync_context is not None
    with pytest.raises(AssertionError):
        sync_context()  # called like a plain function: no task is running
