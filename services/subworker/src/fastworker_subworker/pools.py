"""What the runner's pools share: their slots, the durations they measure, and how their
outcomes go out.

Every pool (``async_pool``, ``thread_pool``, ``process_lanes``) takes one of ``concurrency``
slots per running chunk or task. Each name's measured duration (a moving average) decides
what may share a chunk: tasks join the chunk at the head of the queue while their expected
work fits in about ``CHUNK_WORK`` (at most ``MAX_CHUNK`` tasks). A task of a name never
measured, or of a slow name, never joins a chunk, so it cannot hold back tasks queued
behind it: other lanes take those. The runner's prefetch hint comes from the same
measurement (``mean_duration``).

This module runs nothing itself.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from fastworker_protocol import Assignment, Outcome
from fastworker_subworker.executor import Executor
from fastworker_subworker.stats import RunStats

CHUNK_WORK = 0.002  # seconds of work handed to a thread or a child at once
MAX_CHUNK = 64
_EWMA_WEIGHT = 0.1

Started = Callable[[list[str]], None]
Finished = Callable[[list[Outcome]], None]
Run = tuple[Assignment, Outcome]


class Durations:
    """Each task name's measured run time, and the mean over every task. Measured on the
    loop, and by the quick lane on its thread (hence the lock); read from either."""

    def __init__(self, stats: RunStats) -> None:
        self.stats = stats
        self.mean: float | None = None
        self._by_name: dict[str, float] = {}
        self._lock = threading.Lock()

    def expected(self, name: str) -> float | None:
        """The measured run time of ``name``, if it has run."""
        return self._by_name.get(name)

    def measure(self, runs: Iterable[Run]) -> None:
        with self._lock:
            for assignment, o in runs:
                self.stats.record(assignment.name, o)
                if o.started_at is None or o.finished_at is None:
                    continue
                duration = o.finished_at - o.started_at
                name = assignment.name
                self._by_name[name] = _average(self._by_name.get(name), duration)
                self.mean = _average(self.mean, duration)

    def take_chunk(
        self, queued: deque[Assignment], lanes: int, most: int | None = None
    ) -> list[Assignment]:
        """The head of ``queued``, plus the tasks behind it that are known to be quick
        (at most ``most`` tasks; the rest shared with the other ``lanes``)."""
        chunk = [queued.popleft()]
        if chunk[0].time_limit is not None:
            return chunk
        budget = CHUNK_WORK - self._by_name.get(chunk[0].name, CHUNK_WORK)
        limit = min(MAX_CHUNK, most or MAX_CHUNK, 1 + len(queued) // lanes)
        while queued and len(chunk) < limit:
            expected = self._by_name.get(queued[0].name)
            if expected is None or expected > budget or queued[0].time_limit is not None:
                break
            chunk.append(queued.popleft())
            budget -= expected
        return chunk


@dataclass(frozen=True)
class Shared:
    """What the runner lends its pools."""

    executor: Executor
    slots: asyncio.Semaphore  # ``concurrency`` of them, for every pool together
    durations: Durations
    on_started: Started
    on_finished: Finished
    changed: Callable[[], None]  # what a pool holds changed (the runner's idle check)

    def report(self, runs: list[Run]) -> None:
        """Measure what ran, and send its outcomes."""
        self.durations.measure(runs)
        if runs:
            self.on_finished([outcome for _, outcome in runs])


class Pool(Protocol):
    """One way of running tasks (on the loop, on threads, in child processes)."""

    @property
    def held(self) -> int:
        """Tasks given to this pool and not finished (running or waiting)."""
        ...

    @property
    def outside_loop(self) -> int:
        """Of those, the ones running on a thread or in a child now."""
        ...

    def add(self, assignment: Assignment) -> None:
        """Take this task (``open_lanes`` starts running what was added)."""

    def open_lanes(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start running what was added, within the pool's limits."""

    def cancel(self, wanted: set[str]) -> list[Run]:
        """Stop the tasks among ``wanted``; returns the outcomes to report now (a pool
        reports those it stops later itself)."""
        ...

    async def give_up(self) -> list[str]:
        """Drop, abandon or interrupt every task held (the drain's time is up); returns
        their ids."""
        ...

    def shutdown(self) -> list[asyncio.Task[None]]:
        """Stop running: cancels the pool's lanes, returned to be awaited."""
        ...

    async def close(self) -> None:
        """Release what the pool holds outside the loop (after ``shutdown``)."""


def _average(mean: float | None, sample: float) -> float:
    return sample if mean is None else mean + _EWMA_WEIGHT * (sample - mean)
