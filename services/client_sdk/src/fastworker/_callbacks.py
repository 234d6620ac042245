"""Completion callbacks: calling back when watched tasks end, without polling.

Tasks to watch are gathered per event-loop turn into groups of up to 1,000; each group is
one held ``get`` with ``any`` set, answered by the control plane the moment one of its
tasks is final, and asked again for the rest. Thousands of outstanding tasks therefore
cost a handful of held requests, and a result arrives as soon as it exists.

The results also go to :meth:`CompletionWatcher.events`, through a buffer of at most
``EVENTS_BUFFER`` results: when nobody reads it fast enough, the oldest are dropped (and
counted in ``events_dropped``), so a client that never reads events holds no more.
A refused token ends the watching (logged once): retrying cannot make it right.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastworker_common.errors import Unauthorized
from fastworker_protocol import TaskResult

log = logging.getLogger("fastworker.callbacks")

Callback = Callable[[TaskResult], Any]
GetAny = Callable[[list[str], float], Awaitable[list[TaskResult | None]]]

GROUP = 1000
HOLD = 30.0
EVENTS_BUFFER = 1000


class CompletionWatcher:
    def __init__(self, get_any: GetAny) -> None:
        self._get_any = get_any
        self._callbacks: dict[str, list[Callback]] = {}
        self._new: list[str] = []
        self._groups: set[asyncio.Task[None]] = set()
        self._events: asyncio.Queue[TaskResult] = asyncio.Queue(EVENTS_BUFFER)
        self.events_dropped = 0

    def watch(self, task_id: str, callback: Callback | None = None) -> None:
        """Call ``callback`` (sync or async) with the task's final result, and put that
        result on :meth:`events`. Safe to call many times for one task."""
        callbacks = self._callbacks.get(task_id)
        if callbacks is None:
            self._callbacks[task_id] = callbacks = []
            if not self._new:
                asyncio.get_running_loop().call_soon(self._start_groups)
            self._new.append(task_id)
        if callback is not None:
            callbacks.append(callback)

    async def events(self) -> AsyncIterator[TaskResult]:
        """Final results of watched tasks, as they end."""
        while True:
            yield await self._events.get()

    @property
    def watching(self) -> int:
        return len(self._callbacks)

    def _start_groups(self) -> None:
        new, self._new = self._new, []
        loop = asyncio.get_running_loop()
        for start in range(0, len(new), GROUP):
            group = loop.create_task(self._follow(new[start : start + GROUP]))
            self._groups.add(group)
            group.add_done_callback(self._groups.discard)

    async def _follow(self, task_ids: list[str]) -> None:
        remaining = list(task_ids)
        while remaining:
            try:
                results = await self._get_any(remaining, HOLD)
            except Unauthorized as exc:  # no retry can fix a wrong token: stop watching
                log.error("watching %d tasks stopped: %s", len(remaining), exc)
                for task_id in remaining:
                    self._callbacks.pop(task_id, None)
                return
            except Exception:
                log.warning("watching %d tasks failed; retrying", len(remaining), exc_info=True)
                await asyncio.sleep(1.0)
                continue
            still = []
            for task_id, result in zip(remaining, results, strict=True):
                if result is None:
                    log.warning("watched task %s is unknown or expired", task_id)
                    self._callbacks.pop(task_id, None)
                elif result.status.is_final:
                    self._deliver(result)
                else:
                    still.append(task_id)
            remaining = still

    def _deliver(self, result: TaskResult) -> None:
        if self._events.full():  # keep the newest: drop the oldest
            self._events.get_nowait()
            self.events_dropped += 1
        self._events.put_nowait(result)
        for callback in self._callbacks.pop(result.task_id, []):
            try:
                outcome = callback(result)
                if inspect.isawaitable(outcome):
                    task = asyncio.ensure_future(outcome)
                    task.add_done_callback(_log_failure)
            except Exception:
                log.exception("callback for task %s raised", result.task_id)

    def close(self) -> None:
        for group in self._groups:
            group.cancel()


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("async callback raised", exc_info=task.exception())
