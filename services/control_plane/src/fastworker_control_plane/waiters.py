"""Requests held until tasks are final (``Submit``/``Get`` with ``wait``).

A held request costs one future and one timer, however many tasks it waits for: it sits
under each of its task ids and counts down as they are resolved. It answers with the
results it was resolved with when they can no longer be read (a task whose
``result_ttl`` is 0 keeps no result, but whoever waited for it gets it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from fastworker_protocol import TaskResult


class _Wait:
    __slots__ = ("done", "remaining", "results")

    def __init__(self, done: asyncio.Future[None], remaining: int) -> None:
        self.done = done
        self.remaining = remaining  # resolutions still to come before it is answered
        self.results: dict[str, TaskResult] = {}  # as resolved

    def resolved(self, result: TaskResult) -> None:
        self.results[result.task_id] = result
        self.remaining -= 1
        if self.remaining <= 0:
            self.release()

    def release(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


class CompletionWaiters:
    def __init__(self) -> None:
        self._waiting: dict[str, list[_Wait]] = {}

    async def wait(
        self,
        task_ids: list[str],
        timeout: float,
        lookup: Callable[[str], TaskResult | None],
        *,
        any_final: bool = False,
    ) -> list[TaskResult | None]:
        """Wait until every known task in ``task_ids`` is final (with ``any_final``: one of
        them is, or one is unknown) or ``timeout`` passes, then return what ``lookup``
        says of each (or, if it no longer knows a task, the result it was resolved with)."""
        delivered: dict[str, TaskResult] = {}
        pending: dict[str, None] = {}  # the tasks not final yet, in order, once each
        for task_id in task_ids:
            current = lookup(task_id)
            if current is not None and not current.status.is_final:
                pending[task_id] = None
        settled = len(pending) < len(set(task_ids))
        if pending and not (any_final and settled):
            loop = asyncio.get_running_loop()
            waiting = _Wait(loop.create_future(), 1 if any_final else len(pending))
            for task_id in pending:
                self._waiting.setdefault(task_id, []).append(waiting)
            timer = loop.call_later(max(0.0, timeout), waiting.release)
            try:
                await waiting.done
                delivered = waiting.results
            finally:
                timer.cancel()
                for task_id in pending:
                    self._forget(task_id, waiting)
        return [lookup(task_id) or delivered.get(task_id) for task_id in task_ids]

    def resolve(self, results: Iterable[TaskResult]) -> None:
        for result in results:
            for waiting in self._waiting.pop(result.task_id, ()):
                waiting.resolved(result)

    def release_all(self) -> None:
        """Answer every held wait now (shutdown): each gets the tasks' current state."""
        for waits in self._waiting.values():
            for waiting in waits:
                waiting.release()

    def _forget(self, task_id: str, waiting: _Wait) -> None:
        waits = self._waiting.get(task_id)
        if waits is None:
            return
        if waiting in waits:
            waits.remove(waiting)
        if not waits:
            del self._waiting[task_id]

    def __len__(self) -> int:
        return sum(len(w) for w in self._waiting.values())
