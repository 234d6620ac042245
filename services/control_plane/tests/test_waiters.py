"""CompletionWaiters hold a request until its tasks are final, time out, or are all released,
and never keep a future once the request has its answer."""

from __future__ import annotations

import asyncio

import pytest

from fastworker_control_plane.waiters import CompletionWaiters, WaitBudget
from fastworker_protocol import TaskResult, TaskState


class Tasks:
    """Stands in for the board: task ids to their current state."""

    def __init__(self, **states: TaskState) -> None:
        self.states = dict(states)

    def lookup(self, task_id: str) -> TaskResult | None:
        state = self.states.get(task_id)
        return None if state is None else TaskResult(task_id=task_id, name="add", status=state)

    def finish(self, *task_ids: str) -> list[TaskResult]:
        for task_id in task_ids:
            self.states[task_id] = TaskState.SUCCESS
        return [r for task_id in task_ids if (r := self.lookup(task_id)) is not None]


def statuses(results: list[TaskResult | None]) -> list[TaskState | None]:
    return [None if r is None else r.status for r in results]


async def held(
    waiters: CompletionWaiters, tasks: Tasks, *ids: str
) -> asyncio.Task[list[TaskResult | None]]:
    """A wait on ``ids`` that has registered its futures and is now holding."""
    waiting = asyncio.create_task(waiters.wait(list(ids), 60, tasks.lookup))
    await asyncio.sleep(0)
    assert not waiting.done()
    return waiting


async def test_a_wait_on_unknown_or_final_tasks_returns_at_once() -> None:
    waiters = CompletionWaiters()
    tasks = Tasks(done=TaskState.SUCCESS, gone=TaskState.CANCELLED)

    results = await asyncio.wait_for(waiters.wait(["done", "ghost", "gone"], 60, tasks.lookup), 2)

    assert statuses(results) == [TaskState.SUCCESS, None, TaskState.CANCELLED]
    assert len(waiters) == 0


async def test_resolve_wakes_only_the_waits_on_those_tasks() -> None:
    waiters = CompletionWaiters()
    tasks = Tasks(a=TaskState.QUEUED, b=TaskState.RUNNING)
    on_a = await held(waiters, tasks, "a")
    on_b = await held(waiters, tasks, "b")

    waiters.resolve(tasks.finish("a"))
    results = await asyncio.wait_for(on_a, 2)
    for _ in range(3):
        await asyncio.sleep(0)

    assert statuses(results) == [TaskState.SUCCESS]
    assert not on_b.done()
    assert len(waiters) == 1

    waiters.resolve(tasks.finish("b"))
    assert statuses(await asyncio.wait_for(on_b, 2)) == [TaskState.SUCCESS]
    assert len(waiters) == 0


async def test_a_wait_on_several_tasks_holds_until_every_one_is_final() -> None:
    waiters = CompletionWaiters()
    tasks = Tasks(a=TaskState.QUEUED, b=TaskState.QUEUED)
    both = await held(waiters, tasks, "a", "b", "a")

    waiters.resolve(tasks.finish("a"))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not both.done()

    waiters.resolve(tasks.finish("b"))
    assert statuses(await asyncio.wait_for(both, 2)) == [TaskState.SUCCESS] * 3
    assert len(waiters) == 0


async def test_a_timeout_returns_the_current_state_of_unfinished_tasks() -> None:
    waiters = CompletionWaiters()
    tasks = Tasks(a=TaskState.RUNNING, b=TaskState.SUCCESS)

    results = await asyncio.wait_for(waiters.wait(["a", "b"], 0.01, tasks.lookup), 2)

    assert statuses(results) == [TaskState.RUNNING, TaskState.SUCCESS]
    assert len(waiters) == 0


async def test_every_wait_on_the_same_task_wakes() -> None:
    waiters = CompletionWaiters()
    tasks = Tasks(a=TaskState.ASSIGNED)
    waits = [await held(waiters, tasks, "a") for _ in range(3)]
    assert len(waiters) == 3

    waiters.resolve(tasks.finish("a"))
    results = await asyncio.wait_for(asyncio.gather(*waits), 2)

    assert [statuses(r) for r in results] == [[TaskState.SUCCESS]] * 3
    assert len(waiters) == 0


async def test_release_all_wakes_every_wait_with_the_current_state() -> None:
    waiters = CompletionWaiters()
    tasks = Tasks(a=TaskState.QUEUED, b=TaskState.RUNNING)
    waits = [await held(waiters, tasks, "a"), await held(waiters, tasks, "a", "b")]

    waiters.release_all()
    results = await asyncio.wait_for(asyncio.gather(*waits), 2)

    assert [statuses(r) for r in results] == [
        [TaskState.QUEUED],
        [TaskState.QUEUED, TaskState.RUNNING],
    ]
    assert len(waiters) == 0


async def test_a_cancelled_wait_leaves_no_future_behind() -> None:
    waiters = CompletionWaiters()
    tasks = Tasks(a=TaskState.QUEUED)
    waiting = await held(waiters, tasks, "a")
    assert len(waiters) == 1

    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, 2)

    assert len(waiters) == 0


async def test_past_the_budget_a_wait_is_answered_at_once_with_what_is_known() -> None:
    waiters = CompletionWaiters(WaitBudget(max_held=2))
    tasks = Tasks(a=TaskState.QUEUED)
    first = await held(waiters, tasks, "a")
    second = await held(waiters, tasks, "a")

    third = await asyncio.wait_for(waiters.wait(["a"], 60, tasks.lookup), 2)

    assert statuses(third) == [TaskState.QUEUED]
    assert (waiters.budget.held, waiters.budget.refused, len(waiters)) == (2, 1, 2)
    waiters.resolve(tasks.finish("a"))
    assert statuses(await first) == statuses(await second) == [TaskState.SUCCESS]
    assert (waiters.budget.held, len(waiters)) == (0, 0)


async def test_thousands_of_waits_on_one_task_leave_in_any_order() -> None:
    waiters = CompletionWaiters()
    tasks = Tasks(a=TaskState.QUEUED)
    waits = [await held(waiters, tasks, "a") for _ in range(2_000)]

    for wait in waits[::2]:
        wait.cancel()
    await asyncio.gather(*waits[::2], return_exceptions=True)

    assert len(waiters) == 1_000
    waiters.resolve(tasks.finish("a"))
    answers = await asyncio.gather(*waits[1::2])
    assert {tuple(statuses(a)) for a in answers} == {(TaskState.SUCCESS,)}
    assert len(waiters) == 0
