"""Requests held until tasks are final (``Submit``/``Get`` with ``wait``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from fastworker_protocol import TaskResult


class CompletionWaiters:
    def __init__(self) -> None:
        self._waiting: dict[str, list[asyncio.Future[None]]] = {}

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
        says of each."""
        loop = asyncio.get_running_loop()
        futures: dict[str, asyncio.Future[None]] = {}
        for task_id in task_ids:
            current = lookup(task_id)
            if current is not None and not current.status.is_final and task_id not in futures:
                futures[task_id] = future = loop.create_future()
                self._waiting.setdefault(task_id, []).append(future)
        settled = len(futures) < len(set(task_ids))
        try:
            if futures and not (any_final and settled):
                until = asyncio.FIRST_COMPLETED if any_final else asyncio.ALL_COMPLETED
                await asyncio.wait(futures.values(), timeout=max(0.0, timeout), return_when=until)
        finally:
            for task_id, future in futures.items():
                self._forget(task_id, future)
        return [lookup(task_id) for task_id in task_ids]

    def resolve(self, results: Iterable[TaskResult]) -> None:
        for result in results:
            for future in self._waiting.pop(result.task_id, ()):
                if not future.done():
                    future.set_result(None)

    def release_all(self) -> None:
        """Answer every held wait now (shutdown): each gets the tasks' current state."""
        for futures in self._waiting.values():
            for future in futures:
                if not future.done():
                    future.set_result(None)

    def _forget(self, task_id: str, future: asyncio.Future[None]) -> None:
        waiting = self._waiting.get(task_id)
        if waiting is None:
            return
        if future in waiting:
            waiting.remove(future)
        if not waiting:
            del self._waiting[task_id]

    def __len__(self) -> int:
        return sum(len(w) for w in self._waiting.values())
