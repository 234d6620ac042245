"""Coalescing single-task submissions: every ``delay`` made during one event-loop turn, at
one priority, travels in one non-atomic ``Submit``.

A program with hundreds of submissions in flight then sends a few large messages instead
of hundreds of small ones, without waiting for anything: the batch leaves at the end of
the current loop turn. Each caller still gets its own id or its own error, because the
control plane accepts or rejects each task of a non-atomic submission on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from fastworker_common.errors import rejection
from fastworker_protocol import Accepted, TaskSpec

SendBatch = Callable[[list[TaskSpec]], Awaitable[Accepted]]

MAX_BATCH = 1000


class SubmitCoalescer:
    def __init__(self, send: SendBatch) -> None:
        self._send = send
        self._pending: list[tuple[TaskSpec, asyncio.Future[str]]] = []
        self._sending: set[asyncio.Task[None]] = set()

    def submit(self, spec: TaskSpec) -> asyncio.Future[str]:
        """The future id of ``spec``, once the control plane has accepted it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.append((spec, future))
        return future

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        loop = asyncio.get_running_loop()
        for start in range(0, len(pending), MAX_BATCH):
            task = loop.create_task(self._send_batch(pending[start : start + MAX_BATCH]))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send_batch(self, batch: list[tuple[TaskSpec, asyncio.Future[str]]]) -> None:
        try:
            reply = await self._send([spec for spec, _ in batch])
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        errors = {r.index: rejection(r.code, r.message) for r in reply.rejected}
        for index, ((_, future), task_id) in enumerate(zip(batch, reply.task_ids, strict=True)):
            if future.done():
                continue  # the caller gave up waiting
            if index in errors:
                future.set_exception(errors[index])
            else:
                future.set_result(task_id)
