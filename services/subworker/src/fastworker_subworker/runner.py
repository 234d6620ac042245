"""Running assigned tasks, at most ``concurrency`` at once.

Async tasks each run as an asyncio task. Sync tasks go through a queue drained by up to
``concurrency`` lanes; each lane hands a worker thread a *chunk* of queued sync tasks, so a
stream of trivial tasks costs one thread hop per chunk rather than per task. A chunk is
built from each task name's measured duration: tasks join the chunk at the head of the
queue while their expected work fits in about 2 ms (at most 64 tasks). A task of a name
never measured, or of a slow name, never joins a chunk, so it cannot hold back tasks
queued behind it: other lanes take those.

A task can be stopped, by its ``timeout`` or because the control plane cancelled it: an
async task is cancelled (``CancelledError`` inside it). A sync task cannot be interrupted:
it is abandoned to its thread and its result discarded; a sync task with a timeout (which
never shares a chunk) also gives its slot back at once, the thread pool keeping spare
threads for such stragglers, while one without keeps its slot until it returns. Either
way the control plane gets an outcome saying ``timeout`` or ``cancelled`` at once.

Stragglers can fill the pool, so a sync task may wait for a thread (``threads``). That
wait is not run time: the control plane hears it started, and its timeout starts, only
when a thread actually starts it. And a task given up while it waits (cancelled, or
handed back by a drain) must never start afterwards: each one carries a ``Ticket`` that
its thread must claim before calling it.

The same measurement gives the prefetch hint the subworker sends the control plane: how
many tasks beyond ``concurrency`` it wants buffered, about 5 ms of work per slot. That
covers the round trip in which finished slots are reported and refilled, so short tasks
arrive in large batches and slots do not idle between them, while tasks of a second or
more are not hoarded away from other subworkers.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterable

from fastworker_protocol import Assignment, FailureReason, Outcome
from fastworker_subworker.child_run import ChildRun, Fate
from fastworker_subworker.executor import Executor
from fastworker_subworker.processes import ProcessPool
from fastworker_subworker.stats import RunStats
from fastworker_subworker.stops import cancelled_before_start, stopped
from fastworker_subworker.threads import TaskThreads, finishes_in_time
from fastworker_subworker.ticket import Ticket

CHUNK_WORK = 0.002  # seconds of sync work handed to a thread at once
MAX_CHUNK = 64
PREFETCH_WORK = 0.005  # seconds of work per slot to keep buffered beyond the running tasks
MAX_PREFETCH = 512
_EWMA_WEIGHT = 0.1

Started = Callable[[list[str]], None]
Finished = Callable[[list[Outcome]], None]


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
        self._processes = processes
        self._concurrency = concurrency
        self._on_started = on_started
        self._on_finished = on_finished
        self._slots = asyncio.Semaphore(concurrency)
        self._threads = TaskThreads(executor, concurrency, on_started)
        self._ticket_lock = threading.Lock()  # shared by the tickets: see ``Ticket``
        self._stop_requests: dict[str, FailureReason] = {}  # task id -> timeout | cancelled
        self._stops: dict[str, asyncio.Future[FailureReason]] = {}  # sync tasks run alone
        self._async: dict[asyncio.Task[None], str] = {}
        self._queued: deque[Assignment] = deque()
        self._in_threads: dict[str, Ticket] = {}  # by task id, until its lane is done
        self._lanes: set[asyncio.Task[None]] = set()
        self._process_queued: deque[Assignment] = deque()
        self._in_children: dict[str, ChildRun] = {}  # by task id, until its chunk ends
        self._process_lanes: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.mean_duration: float | None = None
        self.stats = stats if stats is not None else RunStats()
        self._durations: dict[str, float] = {}  # per task name, moving average

    @property
    def held(self) -> int:
        """Tasks given to this worker and not finished (running or waiting for a slot)."""
        return (
            len(self._async)
            + len(self._queued)
            + len(self._in_threads)
            + len(self._process_queued)
            + len(self._in_children)
        )

    @property
    def outside_loop(self) -> int:
        """Tasks on a thread or in a child now: their time passes outside the event loop
        (the in-process test cluster lets its clock skip only while this is 0)."""
        return len(self._in_threads) + len(self._in_children)

    def prefetch_hint(self) -> int:
        """Tasks wanted beyond the slots: about ``PREFETCH_WORK`` of work per slot, and
        with a process pool at least one per child, so a child that finishes a long task
        takes the next one here rather than idling through a round trip."""
        floor = 0 if self._processes is None else self._processes.options.processes
        if self.mean_duration is None:
            return floor
        work = self._concurrency * PREFETCH_WORK
        return max(floor, min(MAX_PREFETCH, int(work / max(self.mean_duration, 1e-6))))

    def submit(self, assignments: list[Assignment]) -> None:
        loop = asyncio.get_running_loop()
        for assignment in assignments:
            pool = self._executor.pool_of(assignment)
            if pool == "async":
                task = loop.create_task(self._run_async(assignment))
                self._async[task] = assignment.id
                task.add_done_callback(self._async_done)
            elif pool == "process" and self._processes is not None:
                self._process_queued.append(assignment)
            else:
                self._queued.append(assignment)
        while self._queued and len(self._lanes) < self._concurrency:
            self._lanes.add(loop.create_task(self._lane()))
        self._open_process_lanes(loop)
        self._update_idle()

    async def _run_async(self, assignment: Assignment) -> None:
        loop = asyncio.get_running_loop()
        entered = False
        try:
            async with self._slots:
                entered = True
                self._on_started([assignment.id])
                timer = None
                if assignment.time_limit is not None:
                    me = asyncio.current_task()
                    assert me is not None
                    timer = loop.call_later(
                        assignment.time_limit,
                        self._stop_async,
                        me,
                        assignment.id,
                        FailureReason.TIMEOUT,
                    )
                try:
                    outcome = await self._executor.run_async(assignment)
                finally:
                    if timer is not None:
                        timer.cancel()
        except asyncio.CancelledError:
            reason = self._stop_requests.pop(assignment.id, None)
            if reason is None:
                raise  # a drain or shutdown: the caller reports it
            outcome = stopped(assignment, reason, ran=entered)
        self._measure([(assignment, outcome)])
        self._on_finished([outcome])

    def _stop_async(self, task: asyncio.Task[None], task_id: str, reason: FailureReason) -> None:
        self._stop_requests[task_id] = reason
        task.cancel()

    def cancel(self, task_ids: list[str]) -> None:
        """Stop these tasks (cancelled on the control plane); each gets a cancelled outcome."""
        wanted = set(task_ids)
        for task, task_id in list(self._async.items()):
            if task_id in wanted:
                self._stop_async(task, task_id, FailureReason.CANCELLED)
        queued = [a for a in self._queued if a.id in wanted]
        for assignment in queued:
            self._queued.remove(assignment)
        stops = [(a, cancelled_before_start(a)) for a in queued]
        stops += self._cancel_in_threads(wanted)
        stops += self._cancel_processes(wanted)
        for assignment, outcome in stops:
            self.stats.record(assignment.name, outcome)
        if stops:
            self._on_finished([outcome for _, outcome in stops])
        self._update_idle()

    def _cancel_processes(self, wanted: set[str]) -> list[tuple[Assignment, Outcome]]:
        """Cancel process tasks: one still queued here at once; one in a child through
        its chunk's run, which reports it."""
        queued = [a for a in self._process_queued if a.id in wanted]
        for assignment in queued:
            self._process_queued.remove(assignment)
        for task_id in wanted & self._in_children.keys():
            self._in_children[task_id].cancel(task_id)
        return [(a, cancelled_before_start(a)) for a in queued]

    def _cancel_in_threads(self, wanted: set[str]) -> list[tuple[Assignment, Outcome]]:
        """Give up the sync tasks among ``wanted``; one still waiting for a thread now never
        starts. Those with a timeout are reported by their lane, which gives their slot
        back at once; the others are reported here (their slot frees when their chunk ends)."""
        reported = []
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

    def _async_done(self, task: asyncio.Task[None]) -> None:
        del self._async[task]
        self._update_idle()

    async def _lane(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await self._drain_queue(loop)
        finally:
            # Synchronously with the last emptiness check: `submit` never counts a lane
            # that has already decided to stop.
            lane = asyncio.current_task()
            assert lane is not None
            self._lanes.discard(lane)

    async def _drain_queue(self, loop: asyncio.AbstractEventLoop) -> None:
        while self._queued:
            async with self._slots:
                if not self._queued:
                    return
                chunk = self._take_chunk(self._queued, self._concurrency)
                tickets = [Ticket(a, self._ticket_lock) for a in chunk]
                self._in_threads.update((t.assignment.id, t) for t in tickets)
                running, began = self._threads.hand_over(loop, tickets)
                try:
                    outcomes = await self._outcomes_of(running, began, tickets)
                finally:
                    for ticket in tickets:
                        del self._in_threads[ticket.assignment.id]
                    self._update_idle()
            by_id = {t.assignment.id: t.assignment for t in tickets}
            self._measure((by_id[o.task_id], o) for o in outcomes)
            if outcomes:
                self._on_finished(outcomes)

    async def _outcomes_of(
        self,
        running: asyncio.Future[list[Outcome]],
        began: asyncio.Future[float],
        tickets: list[Ticket],
    ) -> list[Outcome]:
        """The chunk's outcomes. A task with a timeout (always alone in its chunk) may be
        stopped, by the timeout or a cancel, and is then abandoned to its thread while its
        slot is given back; other tasks are simply awaited (the common, cheaper path)."""
        if len(tickets) > 1 or tickets[0].assignment.time_limit is None:
            return self._kept(await running, tickets)
        [ticket] = tickets
        task_id, timeout = ticket.assignment.id, ticket.assignment.time_limit
        assert timeout is not None
        stop: asyncio.Future[FailureReason] = asyncio.get_running_loop().create_future()
        self._stops[task_id] = stop
        try:
            finished = await finishes_in_time(running, began, stop, timeout)
        finally:
            del self._stops[task_id]
        if stop.done():
            reason = stop.result()  # cancelled (the ticket is already abandoned)
        elif ticket.abandoned:
            return []  # handed back by a drain, which reports it
        elif finished:
            return self._kept(running.result(), tickets)
        else:
            reason = FailureReason.TIMEOUT
        ticket.abandon()
        running.add_done_callback(_discard)
        return [stopped(ticket.assignment, reason, ran=ticket.started)]

    def _kept(self, outcomes: list[Outcome], tickets: list[Ticket]) -> list[Outcome]:
        """Outcomes from a thread, less those of tasks given up meanwhile (already told)."""
        given_up = {t.assignment.id for t in tickets if t.abandoned}
        return [o for o in outcomes if o.task_id not in given_up] if given_up else outcomes

    def _take_chunk(
        self, queued: deque[Assignment], lanes: int, most: int | None = None
    ) -> list[Assignment]:
        """The head of ``queued``, plus the tasks behind it that are known to be quick
        (at most ``most`` tasks; the rest shared with the other ``lanes``)."""
        chunk = [queued.popleft()]
        if chunk[0].time_limit is not None:
            return chunk
        budget = CHUNK_WORK - self._durations.get(chunk[0].name, CHUNK_WORK)
        limit = min(MAX_CHUNK, most or MAX_CHUNK, 1 + len(queued) // lanes)
        while queued and len(chunk) < limit:
            expected = self._durations.get(queued[0].name)
            if expected is None or expected > budget or queued[0].time_limit is not None:
                break
            chunk.append(queued.popleft())
            budget -= expected
        return chunk

    def _open_process_lanes(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._processes is None:
            return
        while self._process_queued and len(self._process_lanes) < self._processes.options.processes:
            lane = loop.create_task(self._process_lane(self._processes))
            self._process_lanes.add(lane)
            lane.add_done_callback(self._process_lanes.discard)

    async def _process_lane(self, pool: ProcessPool) -> None:
        """Chunks of process tasks, each to an idle child (waited for first: not run time)."""
        while self._process_queued:
            child = await pool.acquire()
            if not self._process_queued:
                pool.release(child)
                return
            async with self._slots:
                if not self._process_queued:
                    pool.release(child)
                    return
                chunk = self._take_chunk(
                    self._process_queued, pool.options.processes, child.tasks_left(pool.options)
                )
                run = ChildRun(child, chunk, self._executor.instrument)
                self._in_children.update((a.id, run) for a in chunk)
                self._on_started([a.id for a in chunk])
                try:
                    end = await run.run()
                except BaseException:
                    pool.discard(child, crashed=False, why="its subworker stopped")
                    raise
                finally:
                    for assignment in chunk:
                        del self._in_children[assignment.id]
                if end.fate == Fate.IDLE:
                    pool.release(child)
                else:
                    pool.discard(child, crashed=end.fate == Fate.DIED, why=end.why)
                for assignment in reversed(end.unstarted):
                    if run.cancelled(assignment.id):  # as the run ended: it must not start
                        end.outcomes.append((assignment, cancelled_before_start(assignment)))
                    else:
                        self._process_queued.appendleft(assignment)
                self._update_idle()
            self._measure(end.outcomes)
            if end.outcomes:
                self._on_finished([outcome for _, outcome in end.outcomes])

    def _measure(self, runs: Iterable[tuple[Assignment, Outcome]]) -> None:
        for assignment, o in runs:
            self.stats.record(assignment.name, o)
            if o.started_at is None or o.finished_at is None:
                continue
            duration = o.finished_at - o.started_at
            self._durations[assignment.name] = _average(
                self._durations.get(assignment.name), duration
            )
            self.mean_duration = _average(self.mean_duration, duration)

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
        unfinished = [a.id for a in self._queued] + sorted(self._in_threads)
        unfinished += [a.id for a in self._process_queued]
        self._queued.clear()
        self._process_queued.clear()
        for run in set(self._in_children.values()):
            unfinished += run.interrupt()  # its child is terminated
        for ticket in self._in_threads.values():
            ticket.abandon()  # one still waiting for a thread now never starts
        cancelled = dict(self._async)
        for task in cancelled:
            task.cancel()
        await asyncio.gather(*cancelled, return_exceptions=True)
        unfinished += cancelled.values()
        return unfinished

    async def start(self) -> None:
        """Start the child processes (``ChildBroken`` if they cannot import the tasks)."""
        if self._processes is not None:
            await self._processes.start()

    def shutdown(self) -> None:
        """Stop the threads without waiting for abandoned sync tasks."""
        for lane in [*self._lanes, *self._process_lanes]:
            lane.cancel()
        self._threads.shutdown()

    async def close(self) -> None:
        """``shutdown``, and stop the child processes (terminating busy ones)."""
        lanes = [*self._lanes, *self._process_lanes]
        self.shutdown()
        await asyncio.gather(*lanes, return_exceptions=True)
        if self._processes is not None:
            await self._processes.close()


def _average(mean: float | None, sample: float) -> float:
    return sample if mean is None else mean + _EWMA_WEIGHT * (sample - mean)


def _discard(future: asyncio.Future[list[Outcome]]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved: an abandoned thread's outcome goes nowhere
