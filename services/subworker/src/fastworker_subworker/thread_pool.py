"""Sync tasks on threads: a queue drained by up to ``concurrency`` lanes; each lane hands a
worker thread (``threads``) a *chunk* of queued tasks (``Durations.take_chunk``), so a
stream of trivial tasks costs one thread hop per chunk rather than per task.

A sync task cannot be interrupted: stopped by its ``timeout`` or a cancel, it is abandoned
to its thread and its result discarded; one with a timeout (which never shares a chunk)
also gives its slot back at once, the thread pool keeping spare threads for such
stragglers, while one without keeps its slot until it returns. Either way the control
plane gets an outcome saying ``timeout`` or ``cancelled`` at once.

Stragglers can fill the pool, so a sync task may wait for a thread. That wait is not run
time: the control plane hears it started, and its timeout starts, only when a thread
actually starts it. And a task given up while it waits (cancelled, or handed back by a
drain) must never start afterwards: each one carries a ``Ticket`` that its thread must
claim before calling it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque

from fastworker_protocol import Assignment, FailureReason, Outcome
from fastworker_subworker.pools import Run, Shared
from fastworker_subworker.stops import cancelled_before_start, stopped
from fastworker_subworker.threads import TaskThreads, finishes_in_time
from fastworker_subworker.ticket import Ticket


class ThreadPool:
    def __init__(self, shared: Shared, concurrency: int) -> None:
        self._shared = shared
        self._concurrency = concurrency
        self._threads = TaskThreads(shared.executor, concurrency, shared.on_started)
        self._ticket_lock = threading.Lock()  # shared by the tickets: see ``Ticket``
        self._queued: deque[Assignment] = deque()
        self._in_threads: dict[str, Ticket] = {}  # by task id, until its lane is done
        self._stops: dict[str, asyncio.Future[FailureReason]] = {}  # sync tasks run alone
        self._lanes: set[asyncio.Task[None]] = set()

    @property
    def held(self) -> int:
        return len(self._queued) + len(self._in_threads)

    @property
    def outside_loop(self) -> int:
        return len(self._in_threads)

    def add(self, assignment: Assignment) -> None:
        self._queued.append(assignment)

    def open_lanes(self, loop: asyncio.AbstractEventLoop) -> None:
        while self._queued and len(self._lanes) < self._concurrency:
            self._lanes.add(loop.create_task(self._lane()))

    def adopt(self, ticket: Ticket, running: asyncio.Future[list[Outcome]]) -> None:
        """Take over a task already running on a thread not the pool's (the quick lane's,
        once it ran long): it takes a slot, and is cancelled, drained and reported like
        the pool's own; ``running`` gets its outcome from that thread."""
        self._in_threads[ticket.assignment.id] = ticket
        self._lanes.add(asyncio.get_running_loop().create_task(self._adopted(ticket, running)))

    async def _adopted(self, ticket: Ticket, running: asyncio.Future[list[Outcome]]) -> None:
        shared = self._shared
        try:
            async with shared.slots:
                try:
                    outcomes = _kept(await running, [ticket])
                finally:
                    del self._in_threads[ticket.assignment.id]
                    shared.changed()
            shared.report([(ticket.assignment, o) for o in outcomes])
        finally:
            lane = asyncio.current_task()
            assert lane is not None
            self._lanes.discard(lane)

    def cancel(self, wanted: set[str]) -> list[Run]:
        """Give up the tasks among ``wanted``: one queued at once, one still waiting for a
        thread now never starts. Those with a timeout are reported by their lane, which
        gives their slot back at once; the others are reported here (their slot frees when
        their chunk ends)."""
        queued = [a for a in self._queued if a.id in wanted]
        for assignment in queued:
            self._queued.remove(assignment)
        reported = [(a, cancelled_before_start(a)) for a in queued]
        for task_id in wanted & self._in_threads.keys():
            ticket = self._in_threads[task_id]
            if ticket.abandoned:
                continue  # already stopped, or handed back by a drain
            never_started = ticket.abandon()
            stop = self._stops.get(task_id)
            if stop is not None:
                stop.set_result(FailureReason.CANCELLED)
            else:
                outcome = stopped(ticket.assignment, FailureReason.CANCELLED, ran=not never_started)
                reported.append((ticket.assignment, outcome))
        return reported

    async def _lane(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await self._drain_queue(loop)
        finally:
            # Synchronously with the last emptiness check: ``open_lanes`` never counts a
            # lane that has already decided to stop.
            lane = asyncio.current_task()
            assert lane is not None
            self._lanes.discard(lane)

    async def _drain_queue(self, loop: asyncio.AbstractEventLoop) -> None:
        shared = self._shared
        while self._queued:
            async with shared.slots:
                if not self._queued:
                    return
                chunk = shared.durations.take_chunk(self._queued, self._concurrency)
                tickets = [Ticket(a, self._ticket_lock) for a in chunk]
                self._in_threads.update((t.assignment.id, t) for t in tickets)
                running, began = self._threads.hand_over(loop, tickets)
                try:
                    outcomes = await self._outcomes_of(running, began, tickets)
                finally:
                    for ticket in tickets:
                        del self._in_threads[ticket.assignment.id]
                    shared.changed()
            by_id = {t.assignment.id: t.assignment for t in tickets}
            shared.report([(by_id[o.task_id], o) for o in outcomes])

    async def _outcomes_of(
        self,
        running: asyncio.Future[list[Outcome]],
        began: asyncio.Future[float],
        tickets: list[Ticket],
    ) -> list[Outcome]:
        """The chunk's outcomes. A task with a time limit (always alone in its chunk) may be
        stopped, by its time limit or a cancel, and is then abandoned to its thread while its
        slot is given back; other tasks are simply awaited (the common, cheaper path)."""
        if len(tickets) > 1 or tickets[0].assignment.time_limit is None:
            return _kept(await running, tickets)
        [ticket] = tickets
        task_id, limit = ticket.assignment.id, ticket.assignment.time_limit
        assert limit is not None
        stop: asyncio.Future[FailureReason] = asyncio.get_running_loop().create_future()
        self._stops[task_id] = stop
        try:
            finished = await finishes_in_time(running, began, stop, limit)
        finally:
            del self._stops[task_id]
        if stop.done():
            reason = stop.result()  # cancelled (the ticket is already abandoned)
        elif ticket.abandoned:
            return []  # handed back by a drain, which reports it
        elif finished:
            return _kept(running.result(), tickets)
        else:
            reason = FailureReason.TIMEOUT
        ticket.abandon()
        running.add_done_callback(_discard)
        return [stopped(ticket.assignment, reason, ran=ticket.started)]

    async def give_up(self) -> list[str]:
        unfinished = [a.id for a in self._queued] + sorted(self._in_threads)
        self._queued.clear()
        for ticket in self._in_threads.values():
            ticket.abandon()  # one still waiting for a thread now never starts
        return unfinished

    def shutdown(self) -> list[asyncio.Task[None]]:
        """Cancel the lanes and stop the threads, not waiting for abandoned tasks."""
        lanes = list(self._lanes)
        for lane in lanes:
            lane.cancel()
        self._threads.shutdown()
        return lanes

    async def close(self) -> None:
        return None


def _kept(outcomes: list[Outcome], tickets: list[Ticket]) -> list[Outcome]:
    """Outcomes from a thread, less those of tasks given up meanwhile (already told)."""
    given_up = {t.assignment.id for t in tickets if t.abandoned}
    return [o for o in outcomes if o.task_id not in given_up] if given_up else outcomes


def _discard(future: asyncio.Future[list[Outcome]]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved: an abandoned thread's outcome goes nowhere
