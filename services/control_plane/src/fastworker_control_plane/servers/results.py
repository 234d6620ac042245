"""Results server: client REQ -> control plane REP on base+4 (results, status, cancel,
listings)."""

from __future__ import annotations

from fastworker_control_plane.engine import Engine
from fastworker_protocol import (
    Cancel,
    Cancelled,
    Get,
    ListSchedules,
    ListTasks,
    ListWorkers,
    Message,
    Results,
    ScheduleList,
    TaskList,
    WorkerList,
)

SERVES: tuple[type[Message], ...] = (Get, Cancel, ListTasks, ListWorkers, ListSchedules)
MAX_LISTED = 10_000


class ResultsHandler:
    def __init__(self, engine: Engine, max_wait: float) -> None:
        self._engine = engine
        self._max_wait = max_wait

    async def __call__(self, message: Message, pipe_id: int) -> Message:
        engine = self._engine
        match message:
            case Get(task_ids=task_ids, wait=wait, any=any_final):
                if wait is None:
                    return Results(results=[engine.lookup(t) for t in task_ids])
                wait = min(wait, self._max_wait)
                return Results(results=await engine.wait(task_ids, wait, any_final=any_final))
            case Cancel(task_id=task_id):
                result, changed = engine.cancel(task_id)
                await engine.durable()
                return Cancelled(task_id=task_id, status=result.status, changed=changed)
            case ListTasks(status=status, limit=limit):
                # Cut to fit: large results must not make every listing oversize.
                listing = engine.board.task_listing(status, min(limit, MAX_LISTED), engine.clock())
                return TaskList(tasks=listing.tasks, more=listing.more)
            case ListWorkers():
                return WorkerList(workers=engine.board.list_workers(engine.clock()))
            case ListSchedules():
                return ScheduleList(schedules=engine.board.list_schedules(engine.clock()))
        raise AssertionError(f"unexpected {message!r}")  # ReplyServer filters by SERVES
