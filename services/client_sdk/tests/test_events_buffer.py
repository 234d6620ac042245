"""The buffer behind ``Client.events()``: bounded, newest kept, drops counted."""

from __future__ import annotations

import asyncio

from fastworker._callbacks import EVENTS_BUFFER, CompletionWatcher
from fastworker_common.errors import Unauthorized
from fastworker_protocol import TaskResult, TaskState


async def test_thousands_of_unread_results_hold_only_the_newest_and_count_the_rest() -> None:
    # Given a watcher whose tasks have all ended, and nobody reading its events
    async def all_done(task_ids: list[str], wait: float) -> list[TaskResult | None]:
        return [TaskResult(task_id=t, name="n", status=TaskState.SUCCESS) for t in task_ids]

    watcher = CompletionWatcher(all_done)
    called: list[TaskResult] = []
    ids = [f"t{i}" for i in range(5000)]
    # When it watches 5,000 tasks (some with a callback)
    for task_id in ids:
        watcher.watch(task_id, called.append if task_id.endswith("7") else None)
    await asyncio.sleep(0)  # the groups start at the end of this loop turn
    await asyncio.gather(*watcher._groups)
    assert watcher.watching == 0
    # Then the buffer holds the newest EVENTS_BUFFER results and counts the dropped ones
    events = watcher.events()
    newest = [(await anext(events)).task_id for _ in range(EVENTS_BUFFER)]
    assert watcher.events_dropped == 5000 - EVENTS_BUFFER
    assert newest == ids[-EVENTS_BUFFER:]
    # and every callback still ran
    assert len(called) == 500
    watcher.close()


async def test_a_refused_token_ends_the_watching_instead_of_retrying_forever() -> None:
    # Given a control plane that refuses this client's token
    asked: list[list[str]] = []

    async def refused(task_ids: list[str], wait: float) -> list[TaskResult | None]:
        asked.append(task_ids)
        raise Unauthorized("unauthorized", "a token is required")

    watcher = CompletionWatcher(refused)
    # When it watches a task
    watcher.watch("t1", lambda result: None)
    await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(*watcher._groups), timeout=5)
    # Then it asked once, stopped, and holds nothing for the task
    assert asked == [["t1"]]
    assert watcher.watching == 0
