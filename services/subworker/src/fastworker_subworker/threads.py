"""The threads sync tasks run on, and when a chunk of them really starts.

The pool has ``concurrency * 2 + 2`` threads: the thread pool's lanes use at most
``concurrency``, the rest is room for stragglers (tasks abandoned by a timeout or a cancel
keep their thread until they return). When stragglers hold every thread, a chunk waits in
the pool's queue, and that wait is not run time: its thread tells the loop when the chunk
starts (one more hop, so only then), and only from then do the control plane hear it
started and its timeout run. Each task's ``Ticket`` is claimed on the thread just before
the call, so one given up while it waited never starts.

The pool is a queue and its threads, handing results back with one
``call_soon_threadsafe``: a ``ThreadPoolExecutor`` behind ``run_in_executor`` cost two to
four times as much per hand-over (its work items, a concurrent future chained to an asyncio
one), and a trivial task pays that twice per run. Its threads are daemons: an abandoned
task still running when the process exits does not hold the exit up.

This module never decides what to run or report; ``thread_pool`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
import time
from collections.abc import Callable
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
        self._pool = _Pool(self._size, "fastworker-task")
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
        running = self._pool.submit(loop, context.run, self._run, loop, tickets, announce)
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
        self._pool.shutdown()


_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]


class _Pool:
    """Up to ``size`` threads running jobs from one queue, started as jobs find none idle."""

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # released by a thread each time it is free
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(
        self, loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any
    ) -> asyncio.Future[Any]:
        """Run ``fn(*args)`` on a thread; the future (of ``loop``) gets what it returns."""
        if self._closed:
            raise RuntimeError("the task threads have been shut down")
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((loop, future, fn, args))
        if not self._idle.acquire(timeout=0) and len(self._threads) < self._size:
            thread = threading.Thread(
                target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return future

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, future, fn, args = job
            try:
                outcome: tuple[bool, Any] = (True, fn(*args))
            except BaseException as exc:  # handed to the awaiting side, as an executor would
                outcome = (False, exc)
            del job, fn, args
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(_settle, future, outcome)
            del future, outcome
            self._idle.release()

    def shutdown(self) -> None:
        """Jobs not started are cancelled; threads end once their job (if any) returns."""
        self._closed = True
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                with contextlib.suppress(RuntimeError):  # the loop has closed
                    job[0].call_soon_threadsafe(job[1].cancel)
        for _ in self._threads:
            self._jobs.put(None)


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


async def finishes_in_time(
    running: asyncio.Future[list[Outcome]],
    began: asyncio.Future[float],
    stop: asyncio.Future[FailureReason],
    time_limit: float,
) -> bool:
    """Whether ``running`` ends before ``stop`` and before ``time_limit`` seconds from its
    start on a thread (``began``): the clock does not run while it waits for one."""
    waited: set[asyncio.Future[Any]] = {running, began, stop}
    done, _ = await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
    if done == {began}:
        remaining = max(0.0, began.result() + time_limit - time.monotonic())
        waited = {running, stop}
        done, _ = await asyncio.wait(waited, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
    return running in done
