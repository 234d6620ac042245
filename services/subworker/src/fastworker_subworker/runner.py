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

The same measurement gives the prefetch hint the subworker sends the control plane: how
many tasks beyond ``concurrency`` it wants buffered, about 5 ms of work per slot. That
covers the round trip in which finished slots are reported and refilled, so short tasks
arrive in large batches and slots do not idle between them, while tasks of a second or
more are not hoarded away from other subworkers.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastworker_protocol import Assignment, Outcome, TaskError
from fastworker_subworker.executor import Executor
from fastworker_subworker.stats import RunStats

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
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._executor = executor
        self._concurrency = concurrency
        self._on_started = on_started
        self._on_finished = on_finished
        self._slots = asyncio.Semaphore(concurrency)
        self._threads = ThreadPoolExecutor(
            concurrency * 2 + 2,
            thread_name_prefix="fastworker-task",  # room for stragglers
        )
        self._stop_requests: dict[str, str] = {}  # task id -> "timeout" | "cancelled"
        self._stops: dict[str, asyncio.Future[str]] = {}  # sync tasks running alone
        self._async: dict[asyncio.Task[None], str] = {}
        self._queued: deque[Assignment] = deque()
        self._in_threads: dict[str, Assignment] = {}  # by task id
        self._abandoned: set[str] = set()
        self._lanes: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.mean_duration: float | None = None
        self.stats = stats if stats is not None else RunStats()
        self._durations: dict[str, float] = {}  # per task name, moving average

    @property
    def held(self) -> int:
        """Tasks given to this worker and not finished (running or waiting for a slot)."""
        return len(self._async) + len(self._queued) + len(self._in_threads)

    def prefetch_hint(self) -> int:
        if self.mean_duration is None:
            return 0
        work = self._concurrency * PREFETCH_WORK
        return min(MAX_PREFETCH, int(work / max(self.mean_duration, 1e-6)))

    def submit(self, assignments: list[Assignment]) -> None:
        loop = asyncio.get_running_loop()
        for assignment in assignments:
            if self._executor.is_async(assignment):
                task = loop.create_task(self._run_async(assignment))
                self._async[task] = assignment.id
                task.add_done_callback(self._async_done)
            else:
                self._queued.append(assignment)
        while self._queued and len(self._lanes) < self._concurrency:
            self._lanes.add(loop.create_task(self._lane()))
        self._update_idle()

    async def _run_async(self, assignment: Assignment) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with self._slots:
                self._on_started([assignment.id])
                timer = None
                if assignment.timeout is not None:
                    me = asyncio.current_task()
                    assert me is not None
                    timer = loop.call_later(
                        assignment.timeout, self._stop_async, me, assignment.id, "timeout"
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
            outcome = stopped(assignment, reason)
        self._measure([(assignment, outcome)])
        self._on_finished([outcome])

    def _stop_async(self, task: asyncio.Task[None], task_id: str, reason: str) -> None:
        self._stop_requests[task_id] = reason
        task.cancel()

    def cancel(self, task_ids: list[str]) -> None:
        """Stop these tasks (cancelled on the control plane); each gets a cancelled outcome."""
        wanted = set(task_ids)
        for task, task_id in list(self._async.items()):
            if task_id in wanted:
                self._stop_async(task, task_id, "cancelled")
        queued = [a for a in self._queued if a.id in wanted]
        for assignment in queued:
            self._queued.remove(assignment)
        for task_id in wanted & self._in_threads.keys():
            stop = self._stops.get(task_id)
            if stop is not None and not stop.done():
                stop.set_result("cancelled")
            elif stop is None:  # no timeout: discard its result; the slot frees when it ends
                self._abandoned.add(task_id)
                assignment = self._in_threads[task_id]
                outcome = stopped(assignment, "cancelled")
                self.stats.record(assignment.name, outcome)
                self._on_finished([outcome])
        if queued:
            outcomes = [stopped(a, "cancelled") for a in queued]
            for assignment, outcome in zip(queued, outcomes, strict=True):
                self.stats.record(assignment.name, outcome)
            self._on_finished(outcomes)
        self._update_idle()

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
                chunk = self._take_chunk()
                ids = [a.id for a in chunk]
                self._in_threads.update((a.id, a) for a in chunk)
                self._on_started(ids)
                context = contextvars.copy_context()
                running = loop.run_in_executor(self._threads, context.run, self._run_chunk, chunk)
                try:
                    outcomes = await self._outcomes_of(running, chunk)
                finally:
                    for task_id in ids:
                        del self._in_threads[task_id]
                    self._update_idle()
            by_id = {a.id: a for a in chunk}
            self._measure((by_id[o.task_id], o) for o in outcomes)
            if outcomes:
                self._on_finished(outcomes)

    async def _outcomes_of(
        self, running: asyncio.Future[list[Outcome]], chunk: list[Assignment]
    ) -> list[Outcome]:
        """The chunk's outcomes. A task with a timeout (always alone in its chunk) may be
        stopped, by the timeout or a cancel, and is then abandoned to its thread while its
        slot is given back; other tasks are simply awaited (the common, cheaper path)."""
        if len(chunk) > 1 or chunk[0].timeout is None:
            return self._kept(await running)
        [assignment] = chunk
        stop: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._stops[assignment.id] = stop
        try:
            waited: set[asyncio.Future[Any]] = {running, stop}
            done, _ = await asyncio.wait(
                waited, timeout=assignment.timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            del self._stops[assignment.id]
        if running in done:
            stop.cancel()
            return self._kept(running.result())
        self._abandoned.add(assignment.id)
        running.add_done_callback(_discard)
        return [stopped(assignment, stop.result() if stop.done() else "timeout")]

    def _kept(self, outcomes: list[Outcome]) -> list[Outcome]:
        """Outcomes from a thread, less those of tasks cancelled meanwhile (already told)."""
        return [o for o in outcomes if o.task_id not in self._abandoned]

    def _run_chunk(self, chunk: list[Assignment]) -> list[Outcome]:
        return [self._executor.run_sync(assignment) for assignment in chunk]

    def _take_chunk(self) -> list[Assignment]:
        """The head of the queue, plus the tasks behind it that are known to be quick."""
        chunk = [self._queued.popleft()]
        if chunk[0].timeout is not None:
            return chunk
        budget = CHUNK_WORK - self._durations.get(chunk[0].name, CHUNK_WORK)
        limit = min(MAX_CHUNK, 1 + len(self._queued) // self._concurrency)  # share the rest
        while self._queued and len(chunk) < limit:
            expected = self._durations.get(self._queued[0].name)
            if expected is None or expected > budget or self._queued[0].timeout is not None:
                break
            chunk.append(self._queued.popleft())
            budget -= expected
        return chunk

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
        self._queued.clear()
        self._abandoned.update(self._in_threads)
        cancelled = dict(self._async)
        for task in cancelled:
            task.cancel()
        await asyncio.gather(*cancelled, return_exceptions=True)
        unfinished += cancelled.values()
        return unfinished

    def shutdown(self) -> None:
        """Stop the threads without waiting for abandoned sync tasks."""
        for lane in self._lanes:
            lane.cancel()
        self._threads.shutdown(wait=False, cancel_futures=True)


def _average(mean: float | None, sample: float) -> float:
    return sample if mean is None else mean + _EWMA_WEIGHT * (sample - mean)


def stopped(assignment: Assignment, reason: str) -> Outcome:
    """The outcome of a task stopped by its timeout or by cancellation."""
    if reason == "timeout":
        error = TaskError(
            type="Timeout",
            reason="timeout",
            message=f"the task ran longer than its {assignment.timeout:g} s timeout",
        )
    else:
        error = TaskError(
            type="Cancelled", reason="cancelled", message="the task was cancelled while it ran"
        )
    return Outcome(task_id=assignment.id, ok=False, error=error, finished_at=time.time())


def _discard(future: asyncio.Future[list[Outcome]]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved: an abandoned thread's outcome goes nowhere
