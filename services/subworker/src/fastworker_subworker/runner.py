"""Running assigned tasks, at most ``concurrency`` at once.

Async tasks each run as an asyncio task. Sync tasks go through a queue drained by up to
``concurrency`` lanes; each lane hands a worker thread a *chunk* of queued sync tasks, so a
stream of trivial tasks costs one thread hop per chunk rather than per task. A chunk is
built from each task name's measured duration: tasks join the chunk at the head of the
queue while their expected work fits in about 2 ms (at most 64 tasks). A task of a name
never measured, or of a slow name, never joins a chunk, so it cannot hold back tasks
queued behind it: other lanes take those.

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
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from fastworker_protocol import Assignment, Outcome
from fastworker_subworker.executor import Executor

CHUNK_WORK = 0.002  # seconds of sync work handed to a thread at once
MAX_CHUNK = 64
PREFETCH_WORK = 0.005  # seconds of work per slot to keep buffered beyond the running tasks
MAX_PREFETCH = 512
_EWMA_WEIGHT = 0.1

Started = Callable[[list[str]], None]
Finished = Callable[[list[Outcome]], None]


class TaskRunner:
    def __init__(
        self, executor: Executor, concurrency: int, on_started: Started, on_finished: Finished
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._executor = executor
        self._concurrency = concurrency
        self._on_started = on_started
        self._on_finished = on_finished
        self._slots = asyncio.Semaphore(concurrency)
        self._threads = ThreadPoolExecutor(concurrency, thread_name_prefix="fastworker-task")
        self._async: dict[asyncio.Task[None], str] = {}
        self._queued: deque[Assignment] = deque()
        self._in_threads: set[str] = set()
        self._abandoned: set[str] = set()
        self._lanes: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.mean_duration: float | None = None
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
        async with self._slots:
            self._on_started([assignment.id])
            outcome = await self._executor.run_async(assignment)
        self._measure([(assignment, outcome)])
        self._on_finished([outcome])

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
                self._in_threads.update(ids)
                self._on_started(ids)
                context = contextvars.copy_context()
                try:
                    outcomes = await loop.run_in_executor(
                        self._threads, context.run, self._run_chunk, chunk
                    )
                finally:
                    self._in_threads.difference_update(ids)
                    self._update_idle()
            kept = [o for o in outcomes if o.task_id not in self._abandoned]
            self._measure(zip(chunk, outcomes, strict=True))
            if kept:
                self._on_finished(kept)

    def _run_chunk(self, chunk: list[Assignment]) -> list[Outcome]:
        return [self._executor.run_sync(assignment) for assignment in chunk]

    def _take_chunk(self) -> list[Assignment]:
        """The head of the queue, plus the tasks behind it that are known to be quick."""
        chunk = [self._queued.popleft()]
        budget = CHUNK_WORK - self._durations.get(chunk[0].name, CHUNK_WORK)
        limit = min(MAX_CHUNK, 1 + len(self._queued) // self._concurrency)  # share the rest
        while self._queued and len(chunk) < limit:
            expected = self._durations.get(self._queued[0].name)
            if expected is None or expected > budget:
                break
            chunk.append(self._queued.popleft())
            budget -= expected
        return chunk

    def _measure(self, runs: Iterable[tuple[Assignment, Outcome]]) -> None:
        for assignment, o in runs:
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
