"""Results server: client REQ -> control plane REP on base+4 (results, status, cancel,
listings, queue and limit controls, workflows' state and cancel, dead letters, run-time
schedules).

Operators' actions that change something are noted in the engine's action log
(``engine.operations.acted``, source ``"client"``: the SDK and the CLI come in here)."""

from __future__ import annotations

from fastworker_control_plane.core.limits import Scope
from fastworker_control_plane.engine import Engine
from fastworker_protocol import (
    AddSchedule,
    Cancel,
    Cancelled,
    CancelWorkflow,
    Get,
    GetWorkflow,
    LimitList,
    ListFailed,
    ListLimits,
    ListQueues,
    ListSchedules,
    ListTasks,
    ListWorkers,
    Message,
    PurgeFailed,
    QueueActed,
    QueueAction,
    QueueList,
    RemoveSchedule,
    Results,
    RetryFailed,
    ScheduleList,
    SetLimit,
    TaskList,
    WorkerList,
)

SERVES: tuple[type[Message], ...] = (
    Get,
    Cancel,
    ListTasks,
    ListWorkers,
    ListSchedules,
    ListQueues,
    QueueAction,
    ListLimits,
    SetLimit,
    GetWorkflow,
    CancelWorkflow,
    ListFailed,
    RetryFailed,
    PurgeFailed,
    AddSchedule,
    RemoveSchedule,
)
SOURCE = "client"
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
                if changed:
                    engine.operations.acted("task.cancel", task_id, SOURCE)
                await engine.outbox.durable()
                return Cancelled(task_id=task_id, status=result.status, changed=changed)
            case GetWorkflow(workflow_id=workflow_id, wait=wait):
                if wait is None:
                    return engine.workflows.info(workflow_id)
                return await engine.workflows.wait(workflow_id, min(wait, self._max_wait))
            case CancelWorkflow(workflow_id=workflow_id):
                cancelled = engine.workflows.cancel(workflow_id)
                await engine.outbox.durable()
                return cancelled
            case ListTasks(status=status, limit=limit):
                # Cut to fit: large results must not make every listing oversize.
                listing = engine.view.task_listing(status, min(limit, MAX_LISTED), engine.clock())
                return TaskList(tasks=listing.tasks, more=listing.more)
            case ListWorkers():
                return WorkerList(workers=engine.view.list_workers(engine.clock()))
            case ListSchedules():
                return ScheduleList(schedules=engine.view.schedule_infos())
            case AddSchedule(schedule=spec):
                added = engine.operations.add_schedule(spec, source="client")
                await engine.outbox.durable()
                return added
            case RemoveSchedule(name=name):
                removed = engine.operations.remove_schedule(name, source="client")
                await engine.outbox.durable()
                return removed
            case ListQueues():
                return QueueList(queues=engine.view.queue_infos(engine.clock()))
            case QueueAction(queue=queue, action=action):
                purged = 0
                if action == "purge":
                    purged = engine.operations.purge_queue(queue)
                else:
                    engine.operations.pause_queue(queue, action == "pause")
                detail = {"purged": purged} if action == "purge" else {}
                engine.operations.acted(f"queue.{action}", queue, SOURCE, **detail)
                await engine.outbox.durable()
                paused = engine.view.is_paused(queue)
                return QueueActed(queue=queue, paused=paused, purged=purged)
            case ListLimits():
                return LimitList(limits=engine.view.limit_infos(engine.clock()))
            case SetLimit(scope=scope, name=name, rate_limit=rate, concurrency_limit=limit):
                engine.operations.set_limit(Scope(scope), name, rate, limit, reset=message.reset)
                engine.operations.acted(
                    "limit.set",
                    name,
                    SOURCE,
                    scope=scope,
                    rate_limit=rate,
                    concurrency_limit=limit,
                    reset=message.reset,
                )
                await engine.outbox.durable()
                return LimitList(limits=engine.view.limit_infos(engine.clock()))
            case ListFailed(filter=selection, limit=limit):
                return engine.operations.list_failed(selection, limit)
            case RetryFailed(filter=selection, all_matching=all_matching):
                retried = engine.operations.retry_failed(selection, all_matching, SOURCE)
                await engine.outbox.durable()
                return retried
            case PurgeFailed(filter=selection, all_matching=all_matching):
                dropped = engine.operations.purge_failed(selection, all_matching, SOURCE)
                await engine.outbox.durable()
                return dropped
        raise AssertionError(f"unexpected {message!r}")  # ReplyServer filters by SERVES
