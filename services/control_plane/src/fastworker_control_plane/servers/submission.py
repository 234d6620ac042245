"""Submission server: client REQ -> control plane REP, one socket per priority.

The port a ``Submit`` arrives on is its tasks' priority. A ``SubmitWorkflow`` is served
on every one of them alike: each of its steps names its own priority.
"""

from __future__ import annotations

from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.engine import Engine
from fastworker_protocol import (
    Accepted,
    ErrorCode,
    Message,
    Priority,
    Rejection,
    Results,
    Submit,
    SubmitWorkflow,
)

SERVES: tuple[type[Message], ...] = (Submit, SubmitWorkflow)


class SubmissionHandler:
    def __init__(self, engine: Engine, priority: Priority, max_wait: float) -> None:
        self._engine = engine
        self._priority = priority
        self._max_wait = max_wait

    async def __call__(self, message: Message, pipe_id: int) -> Message:
        if not self._engine.accepting:
            raise Rejected(ErrorCode.SHUTTING_DOWN, "the control plane is shutting down")
        if isinstance(message, SubmitWorkflow):
            accepted = self._engine.workflows.submit(message)
            await self._engine.outbox.durable()
            return accepted
        assert isinstance(message, Submit)
        if not message.atomic:
            if message.wait is not None:
                raise Rejected(ErrorCode.INVALID_MESSAGE, "a non-atomic submit cannot wait")
            task_ids, rejected = self._engine.submit_each(message.tasks, self._priority)
            await self._engine.outbox.durable()
            return Accepted(
                task_ids=task_ids,
                rejected=[
                    Rejection(index=r.index or 0, code=r.code, message=r.message) for r in rejected
                ],
            )
        task_ids = self._engine.submit(message.tasks, self._priority)
        await self._engine.outbox.durable()
        if message.wait is None:
            return Accepted(task_ids=task_ids)
        results = await self._engine.wait(task_ids, min(message.wait, self._max_wait))
        return Results(results=results)
