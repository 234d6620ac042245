"""The threads sync tasks run on, and when a chunk of them really starts.

The pool has ``concurrency * 2 + 2`` threads: the runner's lanes use at most
``concurrency``, the rest is room for stragglers (tasks abandoned by a timeout or a cancel
keep their thread until they return). When stragglers hold every thread, a chunk waits in
the pool's queue, and that wait is not run time: its thread tells the loop when the chunk
starts (one more hop, so only then), and only from then do the control plane hear it
started and its timeout run. Each task's ``Ticket`` is claimed on the thread just before
the call, so one given up while it waited never starts.

This module never decides what to run or report; the runner does.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastworker_protocol import FailureReason, Outcome
from fastworker_subworker.executor import Executor
from fastworker_subworker.ticket import Ticket


class TaskThreads:
    def __init__(
        self, executor: Executor, concurrency: int, on_started: Callable[[list[str]], None]
    ) -> None:
        self._executor = executor
        self._on_started = on_started
        self._size = concurrency * 2 + 2  # room for stragglers
        self._pool = ThreadPoolExecutor(self._size, thread_name_prefix="fastworker-task")
        self._in_pool = 0  # chunks handed over and not back (stragglers included)

    def hand_over(
        self, loop: asyncio.AbstractEventLoop, tickets: list[Ticket]
    ) -> tuple[asyncio.Future[list[Outcome]], asyncio.Future[float]]:
        """Give a chunk to a thread; returns its outcomes-to-be and when it started (a
        ``time.monotonic()``). With a thread free, it starts now."""
        began: asyncio.Future[float] = loop.create_future()
        waits = self._in_pool >= self._size
        if not waits:
            began.set_result(time.monotonic())
            self._on_started([t.assignment.id for t in tickets])
        context = contextvars.copy_context()
        announce = began if waits else None
        running = loop.run_in_executor(self._pool, context.run, self._run, loop, tickets, announce)
        self._in_pool += 1
        running.add_done_callback(self._returned)
        return running, began

    def _returned(self, _: asyncio.Future[list[Outcome]]) -> None:
        self._in_pool -= 1

    def _run(
        self,
        loop: asyncio.AbstractEventLoop,
        tickets: list[Ticket],
        announce: asyncio.Future[float] | None,
    ) -> list[Outcome]:
        """On a pool thread: run each task whose ticket it can still claim. A chunk that
        waited for this thread tells the loop when its first task starts (``announce``)."""
        outcomes: list[Outcome] = []
        for ticket in tickets:
            if not ticket.start():
                continue  # given up while it waited for this thread: it must not start now
            if announce is not None:
                loop.call_soon_threadsafe(self._began, tickets, announce, time.monotonic())
                announce = None
            outcomes.append(self._executor.run_sync(ticket.assignment))
        return outcomes

    def _began(self, tickets: list[Ticket], began: asyncio.Future[float], at: float) -> None:
        if not began.done():
            began.set_result(at)
        ids = [t.assignment.id for t in tickets if not t.abandoned]
        if ids:
            self._on_started(ids)

    def shutdown(self) -> None:
        """Stop the threads without waiting for abandoned sync tasks."""
        self._pool.shutdown(wait=False, cancel_futures=True)


async def finishes_in_time(
    running: asyncio.Future[list[Outcome]],
    began: asyncio.Future[float],
    stop: asyncio.Future[FailureReason],
    timeout: float,
) -> bool:
    """Whether ``running`` ends before ``stop`` and before ``timeout`` seconds from its
    start on a thread (``began``): the clock does not run while it waits for one."""
    waited: set[asyncio.Future[Any]] = {running, began, stop}
    done, _ = await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
    if done == {began}:
        remaining = max(0.0, began.result() + timeout - time.monotonic())
        waited = {running, stop}
        done, _ = await asyncio.wait(waited, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
    return running in done
