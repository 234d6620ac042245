"""The clients' calls that list and steer what the control plane holds: tasks, schedules,
workers, named queues (pause, resume, purge) and rate and concurrency limits, mixed into
both clients. Every one goes on the results channel (base + 4).

Never import the subworker or the control plane from here.
"""

from __future__ import annotations

from typing import TypeVar

from fastworker._calls import TaskPage, limit_change, queue_action, task_page
from fastworker_protocol import (
    LimitInfo,
    LimitList,
    ListLimits,
    ListQueues,
    ListSchedules,
    ListTasks,
    ListWorkers,
    Message,
    Priority,
    QueueActed,
    QueueInfo,
    QueueList,
    ScheduleInfo,
    ScheduleList,
    TaskList,
    TaskState,
    WorkerInfo,
    WorkerList,
)

M = TypeVar("M", bound=Message)
RESULTS = None  # the results channel's lane


class AsyncAdmin:
    """The async client's listing and steering calls (mixed into
    :class:`~fastworker.client.Client`)."""

    async def _request(
        self, lane: Priority | None, message: Message, reply_type: type[M], wait: float | None
    ) -> M:
        raise NotImplementedError

    async def list_tasks(self, status: TaskState | str | None = None, limit: int = 100) -> TaskPage:
        state = TaskState(status) if status is not None else None
        message = ListTasks(status=state, limit=limit)
        reply = await self._request(RESULTS, message, TaskList, None)
        return task_page(reply)

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule, declared by ``@task`` or added at run time (``source``): its
        spec, the task and arguments it runs, next and last run, runs and skipped ticks."""
        reply = await self._request(RESULTS, ListSchedules(), ScheduleList, None)
        return reply.schedules

    async def list_workers(self) -> list[WorkerInfo]:
        reply = await self._request(RESULTS, ListWorkers(), WorkerList, None)
        return reply.workers

    async def list_queues(self) -> list[QueueInfo]:
        """Every named queue: depth per priority, oldest task's age, running tasks,
        workers serving it, whether it is paused, its limits."""
        reply = await self._request(RESULTS, ListQueues(), QueueList, None)
        return reply.queues

    async def pause_queue(self, queue: str) -> None:
        """Stop dispatching from ``queue`` (it still accepts tasks) until resumed; kept
        across control-plane restarts with a state dir."""
        await self._queue_action(queue, "pause")

    async def resume_queue(self, queue: str) -> None:
        await self._queue_action(queue, "resume")

    async def purge_queue(self, queue: str) -> int:
        """Cancel every task queued in ``queue`` (not running, delayed or retrying ones);
        returns how many."""
        return (await self._queue_action(queue, "purge")).purged

    async def _queue_action(self, queue: str, action: str) -> QueueActed:
        message = queue_action(queue, action)
        return await self._request(RESULTS, message, QueueActed, None)

    async def list_limits(self) -> list[LimitInfo]:
        """Every rate and concurrency limit in effect, declared or set at run time."""
        reply = await self._request(RESULTS, ListLimits(), LimitList, None)
        return reply.limits

    async def set_limit(
        self,
        scope: str,
        name: str,
        *,
        rate: str | None = None,
        concurrency: int | None = None,
        reset: bool = False,
    ) -> list[LimitInfo]:
        """Change a ``"queue"``'s or a ``"task"`` name's limits at run time: ``rate`` like
        ``"100/s"`` (``"off"`` lifts it), ``concurrency`` tasks running at once (0 lifts
        it); ``None`` leaves one as it is, ``reset`` first goes back to what ``@task``
        declared. Kept across restarts with a state dir. Returns the limits now."""
        message = limit_change(scope, name, rate, concurrency, reset)
        return (await self._request(RESULTS, message, LimitList, None)).limits


class SyncAdmin:
    """The blocking client's listing and steering calls (mixed into ``SyncClient``), as
    the async client's."""

    def _request(
        self,
        lane: Priority | None,
        message: Message,
        reply_type: type[M],
        wait: float | None = None,
    ) -> M:
        raise NotImplementedError

    def list_tasks(self, status: TaskState | str | None = None, limit: int = 100) -> TaskPage:
        state = TaskState(status) if status is not None else None
        message = ListTasks(status=state, limit=limit)
        return task_page(self._request(RESULTS, message, TaskList))

    def list_schedules(self) -> list[ScheduleInfo]:
        """As :meth:`Client.list_schedules`: every schedule, declared or added."""
        return self._request(RESULTS, ListSchedules(), ScheduleList).schedules

    def list_workers(self) -> list[WorkerInfo]:
        return self._request(RESULTS, ListWorkers(), WorkerList).workers

    def list_queues(self) -> list[QueueInfo]:
        """As :meth:`Client.list_queues`."""
        return self._request(RESULTS, ListQueues(), QueueList).queues

    def pause_queue(self, queue: str) -> None:
        """As :meth:`Client.pause_queue`."""
        self._queue_action(queue, "pause")

    def resume_queue(self, queue: str) -> None:
        self._queue_action(queue, "resume")

    def purge_queue(self, queue: str) -> int:
        """As :meth:`Client.purge_queue`."""
        return self._queue_action(queue, "purge").purged

    def _queue_action(self, queue: str, action: str) -> QueueActed:
        return self._request(RESULTS, queue_action(queue, action), QueueActed)

    def list_limits(self) -> list[LimitInfo]:
        return self._request(RESULTS, ListLimits(), LimitList).limits

    def set_limit(
        self,
        scope: str,
        name: str,
        *,
        rate: str | None = None,
        concurrency: int | None = None,
        reset: bool = False,
    ) -> list[LimitInfo]:
        """As :meth:`Client.set_limit`."""
        message = limit_change(scope, name, rate, concurrency, reset)
        return self._request(RESULTS, message, LimitList).limits
