"""The clients' calls on failed tasks (dead letters) and on schedules made at run time:
``list_failed``, ``get_failed``, ``retry_failed``, ``purge_failed``, ``add_schedule``,
``remove_schedule``, mixed into both clients.

Each is a thin loop over ``_operations`` (what is sent, how replies are read, when to ask
again); every one goes on the results channel (base + 4). The control plane acts on at
most ``MAX_FAILED_ACTED`` dead letters a request, so a retry or purge of more asks again
until everything selected is done.

Never import the subworker or the control plane from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from fastworker._calls import TaskRef
from fastworker._operations import (
    FailedPage,
    Retries,
    When,
    check_schedule_name,
    check_selection,
    failed_filter,
    failed_page,
    list_message,
    one_failed,
    purge_again,
    purge_messages,
    retry_again,
    retry_messages,
    schedule_spec,
)
from fastworker_protocol import (
    AddSchedule,
    DeadLetter,
    FailedList,
    FailedPurged,
    FailedRetried,
    Message,
    Priority,
    RemoveSchedule,
    RetryFailed,
    ScheduleAdded,
    ScheduleInfo,
    ScheduleRemoved,
)

M = TypeVar("M", bound=Message)
RESULTS = None  # the results channel's lane


class AsyncOperations:
    """The async client's operations calls (mixed into :class:`~fastworker.client.Client`)."""

    async def _request(
        self, lane: Priority | None, message: Message, reply_type: type[M], wait: float | None
    ) -> M:
        raise NotImplementedError

    async def list_failed(
        self,
        *,
        task_name: str | None = None,
        error_type: str | None = None,
        since: When = None,
        until: When = None,
        limit: int = 100,
    ) -> FailedPage:
        """The dead letters (tasks that failed for good, a lost worker or a timeout
        included), newest first, at most ``limit`` (up to 10,000): only those of task
        ``task_name``, whose error type is ``error_type`` (``"ValueError"``,
        ``"WorkerLost"``...), that failed at or after ``since`` and before ``until`` (a
        datetime, naive = UTC, or Unix seconds). The returned list's ``total`` says how
        many matched."""
        found = failed_filter(task_name=task_name, error_type=error_type, since=since, until=until)
        reply = await self._request(RESULTS, list_message(found, limit), FailedList, None)
        return failed_page(reply)

    async def get_failed(self, task_id: str) -> DeadLetter:
        """The dead letter of task ``task_id``: its arguments, every attempt's error and
        the last one's traceback; raises ``TaskNotFound`` if the store has none (never
        failed for good, or retried, purged or expired since)."""
        message = list_message(failed_filter([task_id]), 1)
        return one_failed(task_id, await self._request(RESULTS, message, FailedList, None))

    async def retry_failed(
        self,
        *task_ids: str,
        all_matching: bool = False,
        task_name: str | None = None,
        error_type: str | None = None,
        since: When = None,
        until: When = None,
    ) -> Retries:
        """Run dead letters again, each as a new task (same name, arguments, priority and
        queue; a new id, whose result's ``retry_of`` names the dead letter), taking them
        out of the store. Either the ``task_ids`` (narrowed by any filter) or, with
        ``all_matching=True``, every dead letter that matches the filters (as
        ``list_failed``'s); ``ValueError`` with neither. Returns each retried id with its
        new id; the list's ``missing`` names the ids that were not in the store."""
        found = failed_filter(
            task_ids, task_name=task_name, error_type=error_type, since=since, until=until
        )
        check_selection(task_ids, all_matching)
        done = Retries()
        for first in retry_messages(found, all_matching):
            message: RetryFailed | None = first
            while message is not None:
                reply = await self._request(RESULTS, message, FailedRetried, None)
                message = retry_again(message, reply, done)
        return done

    async def purge_failed(
        self,
        *task_ids: str,
        all_matching: bool = False,
        task_name: str | None = None,
        error_type: str | None = None,
        since: When = None,
        until: When = None,
    ) -> int:
        """Drop dead letters, selected as :meth:`retry_failed` selects them; returns how
        many were dropped."""
        found = failed_filter(
            task_ids, task_name=task_name, error_type=error_type, since=since, until=until
        )
        check_selection(task_ids, all_matching)
        purged = 0
        for message in purge_messages(found, all_matching):
            while True:
                reply = await self._request(RESULTS, message, FailedPurged, None)
                purged += reply.purged
                if not purge_again(message, reply):
                    break
        return purged

    async def add_schedule(
        self,
        name: str,
        task: TaskRef,
        *,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        cron: str | None = None,
        interval: float | timedelta | None = None,
        tz: str = "UTC",
        priority: Priority | str | None = None,
        queue: str | None = None,
    ) -> ScheduleInfo:
        """Run ``task`` (a ``@task`` or a registered name) with ``args`` and ``kwargs``
        every ``interval`` (seconds, or a timedelta) or on a ``cron`` expression (five
        fields, in time zone ``tz``): exactly one of the two. Runs take ``priority`` (by
        default the ``@task``'s, else normal) and go to ``queue`` (default: the task's).
        The control plane keeps it across restarts (with a state dir) and runs it once per
        tick however many subworkers there are; adding a schedule under a name already
        added replaces it (the same definition again changes nothing), and a declared
        schedule's name (its task's) is refused. Returns the schedule, with its next run.
        Raises ``UnknownTask`` / ``InvalidArguments`` as a submission would."""
        spec = schedule_spec(
            name,
            task,
            args,
            kwargs,
            cron=cron,
            interval=interval,
            tz=tz,
            priority=priority,
            queue=queue,
        )
        reply = await self._request(RESULTS, AddSchedule(schedule=spec), ScheduleAdded, None)
        return reply.schedule

    async def remove_schedule(self, name: str) -> bool:
        """Stop and forget the schedule added as ``name`` (a run already queued still
        runs); ``False`` if there was none. A schedule a ``@task`` declares is refused
        (``RequestRejected``): remove its ``cron``/``repeat_interval`` from the code."""
        message = RemoveSchedule(name=check_schedule_name(name))
        return (await self._request(RESULTS, message, ScheduleRemoved, None)).removed


class SyncOperations:
    """The blocking client's operations calls (mixed into ``SyncClient``), as the async
    client's."""

    def _request(
        self,
        lane: Priority | None,
        message: Message,
        reply_type: type[M],
        wait: float | None = None,
    ) -> M:
        raise NotImplementedError

    def list_failed(
        self,
        *,
        task_name: str | None = None,
        error_type: str | None = None,
        since: When = None,
        until: When = None,
        limit: int = 100,
    ) -> FailedPage:
        """As :meth:`Client.list_failed`: the dead letters, newest first."""
        found = failed_filter(task_name=task_name, error_type=error_type, since=since, until=until)
        return failed_page(self._request(RESULTS, list_message(found, limit), FailedList))

    def get_failed(self, task_id: str) -> DeadLetter:
        """As :meth:`Client.get_failed`: one dead letter, whole; ``TaskNotFound`` if none."""
        message = list_message(failed_filter([task_id]), 1)
        return one_failed(task_id, self._request(RESULTS, message, FailedList))

    def retry_failed(
        self,
        *task_ids: str,
        all_matching: bool = False,
        task_name: str | None = None,
        error_type: str | None = None,
        since: When = None,
        until: When = None,
    ) -> Retries:
        """As :meth:`Client.retry_failed`: run dead letters again as new tasks."""
        found = failed_filter(
            task_ids, task_name=task_name, error_type=error_type, since=since, until=until
        )
        check_selection(task_ids, all_matching)
        done = Retries()
        for first in retry_messages(found, all_matching):
            message: RetryFailed | None = first
            while message is not None:
                reply = self._request(RESULTS, message, FailedRetried)
                message = retry_again(message, reply, done)
        return done

    def purge_failed(
        self,
        *task_ids: str,
        all_matching: bool = False,
        task_name: str | None = None,
        error_type: str | None = None,
        since: When = None,
        until: When = None,
    ) -> int:
        """As :meth:`Client.purge_failed`: drop dead letters; returns how many."""
        found = failed_filter(
            task_ids, task_name=task_name, error_type=error_type, since=since, until=until
        )
        check_selection(task_ids, all_matching)
        purged = 0
        for message in purge_messages(found, all_matching):
            while True:
                reply = self._request(RESULTS, message, FailedPurged)
                purged += reply.purged
                if not purge_again(message, reply):
                    break
        return purged

    def add_schedule(
        self,
        name: str,
        task: TaskRef,
        *,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        cron: str | None = None,
        interval: float | timedelta | None = None,
        tz: str = "UTC",
        priority: Priority | str | None = None,
        queue: str | None = None,
    ) -> ScheduleInfo:
        """As :meth:`Client.add_schedule`: run a task with arguments on a schedule."""
        spec = schedule_spec(
            name,
            task,
            args,
            kwargs,
            cron=cron,
            interval=interval,
            tz=tz,
            priority=priority,
            queue=queue,
        )
        return self._request(RESULTS, AddSchedule(schedule=spec), ScheduleAdded).schedule

    def remove_schedule(self, name: str) -> bool:
        """As :meth:`Client.remove_schedule`; ``False`` if there was none."""
        message = RemoveSchedule(name=check_schedule_name(name))
        return self._request(RESULTS, message, ScheduleRemoved).removed
