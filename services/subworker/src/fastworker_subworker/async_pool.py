"""Async tasks: each runs as an asyncio task on the subworker's loop, in one of the slots.

Stopped by its ``timeout`` or a cancel from the control plane, such a task is cancelled
(``CancelledError`` inside it) and reported as ``timeout`` or ``cancelled``; cancelled by a
drain or a shutdown, it is reported by the runner as interrupted.
"""

from __future__ import annotations

import asyncio

from fastworker_protocol import Assignment, FailureReason
from fastworker_subworker.pools import Run, Shared
from fastworker_subworker.stops import stopped


class AsyncPool:
    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._running: dict[asyncio.Task[None], str] = {}  # -> task id
        self._stop_requests: dict[str, FailureReason] = {}  # task id -> timeout | cancelled

    @property
    def held(self) -> int:
        return len(self._running)

    @property
    def outside_loop(self) -> int:
        return 0

    def add(self, assignment: Assignment) -> None:
        task = asyncio.get_running_loop().create_task(self._run(assignment))
        self._running[task] = assignment.id
        task.add_done_callback(self._done)

    def open_lanes(self, loop: asyncio.AbstractEventLoop) -> None:
        return None  # each task started as it was added

    async def _run(self, assignment: Assignment) -> None:
        shared = self._shared
        loop = asyncio.get_running_loop()
        entered = False
        try:
            async with shared.slots:
                entered = True
                shared.on_started([assignment.id])
                timer = None
                if assignment.time_limit is not None:
                    me = asyncio.current_task()
                    assert me is not None
                    timer = loop.call_later(
                        assignment.time_limit, self._stop, me, assignment.id, FailureReason.TIMEOUT
                    )
                try:
                    outcome = await shared.executor.run_async(assignment)
                finally:
                    if timer is not None:
                        timer.cancel()
        except asyncio.CancelledError:
            reason = self._stop_requests.pop(assignment.id, None)
            if reason is None:
                raise  # a drain or shutdown: the caller reports it
            outcome = stopped(assignment, reason, ran=entered)
        shared.report([(assignment, outcome)])

    def _stop(self, task: asyncio.Task[None], task_id: str, reason: FailureReason) -> None:
        self._stop_requests[task_id] = reason
        task.cancel()

    def _done(self, task: asyncio.Task[None]) -> None:
        del self._running[task]
        self._shared.changed()

    def cancel(self, wanted: set[str]) -> list[Run]:
        for task, task_id in list(self._running.items()):
            if task_id in wanted:
                self._stop(task, task_id, FailureReason.CANCELLED)
        return []  # each reports its own stop

    async def give_up(self) -> list[str]:
        cancelled = dict(self._running)
        for task in cancelled:
            task.cancel()
        await asyncio.gather(*cancelled, return_exceptions=True)
        return list(cancelled.values())

    def shutdown(self) -> list[asyncio.Task[None]]:
        return []

    async def close(self) -> None:
        return None
