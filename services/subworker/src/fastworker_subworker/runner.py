"""Running assigned tasks, at most ``concurrency`` at once, each in the pool its task names:
async tasks on the loop (``async_pool``), sync tasks on threads (``thread_pool``), and
``pool="process"`` tasks in child processes (``process_lanes``, when the subworker has a
process pool; on threads otherwise). The pools share the slots and the measured durations
(``pools``); this module only routes tasks to them and speaks for them as one.

A task can be stopped, by its ``timeout`` or because the control plane cancelled it; each
pool says how. Either way the control plane gets an outcome saying ``timeout`` or
``cancelled`` at once.

The measured durations give the prefetch hint the subworker sends the control plane: how
many tasks beyond ``concurrency`` it wants buffered, about 5 ms of work per slot. That
covers the round trip in which finished slots are reported and refilled, so short tasks
arrive in large batches and slots do not idle between them, while tasks of a second or
more are not hoarded away from other subworkers.
"""

from __future__ import annotations

import asyncio
import contextlib

from fastworker_protocol import Assignment, Outcome
from fastworker_subworker.async_pool import AsyncPool
from fastworker_subworker.executor import Executor
from fastworker_subworker.pools import Durations, Finished, Pool, Shared, Started
from fastworker_subworker.process_lanes import ProcessLanes
from fastworker_subworker.processes import ProcessPool
from fastworker_subworker.stats import RunStats
from fastworker_subworker.thread_pool import ThreadPool
from fastworker_subworker.ticket import Ticket

PREFETCH_WORK = 0.005  # seconds of work per slot to keep buffered beyond the running tasks
MAX_PREFETCH = 512


class TaskRunner:
    def __init__(
        self,
        executor: Executor,
        concurrency: int,
        on_started: Started,
        on_finished: Finished,
        stats: RunStats | None = None,
        processes: ProcessPool | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._executor = executor
        self._concurrency = concurrency
        self._holding: dict[str, None] = {}  # given and not finished, oldest first

        def finished(outcomes: list[Outcome]) -> None:
            for outcome in outcomes:
                self._holding.pop(outcome.task_id, None)
            on_finished(outcomes)

        self._on_finished = finished
        self.stats = stats if stats is not None else RunStats()
        self._durations = Durations(self.stats)
        shared = Shared(
            executor,
            asyncio.Semaphore(concurrency),
            self._durations,
            on_started,
            finished,
            self._update_idle,
        )
        self._threads = ThreadPool(shared, concurrency)
        self._children = None if processes is None else ProcessLanes(shared, processes)
        self._async = AsyncPool(shared)
        # In the order a drain lists what it gave up.
        self._pools: list[Pool] = [self._threads]
        if self._children is not None:
            self._pools.append(self._children)
        self._pools.append(self._async)
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def held(self) -> int:
        """Tasks given to this worker and not finished (running or waiting for a slot)."""
        return sum(pool.held for pool in self._pools)

    @property
    def holding(self) -> list[str]:
        """The ids of the tasks it holds (running or waiting for a slot)."""
        return list(self._holding)

    @property
    def outside_loop(self) -> int:
        """Tasks on a thread or in a child now: their time passes outside the event loop
        (the in-process test cluster lets its clock skip only while this is 0)."""
        return sum(pool.outside_loop for pool in self._pools)

    @property
    def mean_duration(self) -> float | None:
        return self._durations.mean

    @property
    def executor(self) -> Executor:
        return self._executor

    @property
    def durations(self) -> Durations:
        return self._durations

    def prefetch_hint(self) -> int:
        """Tasks wanted beyond the slots: about ``PREFETCH_WORK`` of work per slot, and
        with a process pool at least one per child, so a child that finishes a long task
        takes the next one here rather than idling through a round trip."""
        floor = 0 if self._children is None else self._children.pool.options.processes
        mean = self._durations.mean
        if mean is None:
            return floor
        work = self._concurrency * PREFETCH_WORK
        return max(floor, min(MAX_PREFETCH, int(work / max(mean, 1e-6))))

    def submit(self, assignments: list[Assignment]) -> None:
        for assignment in assignments:
            self._holding[assignment.id] = None
            self._pool_of(assignment).add(assignment)
        loop = asyncio.get_running_loop()
        for pool in self._pools:
            pool.open_lanes(loop)
        self._update_idle()

    def adopt(self, ticket: Ticket, running: asyncio.Future[list[Outcome]]) -> None:
        """Hold a sync task already running on a thread of its own (``ThreadPool.adopt``)."""
        self._holding[ticket.assignment.id] = None
        self._threads.adopt(ticket, running)
        self._update_idle()

    def _pool_of(self, assignment: Assignment) -> Pool:
        pool = self._executor.pool_of(assignment)
        if pool == "async":
            return self._async
        if pool == "process" and self._children is not None:
            return self._children
        return self._threads

    def cancel(self, task_ids: list[str]) -> None:
        """Stop these tasks (cancelled on the control plane); each gets a cancelled outcome."""
        wanted = set(task_ids)
        stops = [run for pool in self._pools for run in pool.cancel(wanted)]
        for assignment, outcome in stops:
            self.stats.record(assignment.name, outcome)
        if stops:
            self._on_finished([outcome for _, outcome in stops])
        self._update_idle()

    def _update_idle(self) -> None:
        if self.held:
            self._idle.clear()
        else:
            self._idle.set()

    async def drain(self, timeout: float) -> list[str]:
        """Wait up to ``timeout`` for every held task; then cancel async ones, drop queued
        ones and abandon sync ones still on a thread. Returns the ids not finished."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout)
        unfinished: list[str] = []
        for pool in self._pools:
            unfinished += await pool.give_up()
        for task_id in unfinished:
            self._holding.pop(task_id, None)
        return unfinished

    async def start(self) -> None:
        """Start the child processes (``ChildBroken`` if they cannot import the tasks)."""
        if self._children is not None:
            await self._children.pool.start()

    def shutdown(self) -> list[asyncio.Task[None]]:
        """Stop the threads without waiting for abandoned sync tasks; returns the lanes
        cancelled."""
        return [lane for pool in self._pools for lane in pool.shutdown()]

    async def close(self) -> None:
        """``shutdown``, and stop the child processes (terminating busy ones)."""
        await asyncio.gather(*self.shutdown(), return_exceptions=True)
        for pool in self._pools:
            await pool.close()
