"""The subworker's conversation with the control plane: ``fetch`` requests that carry what
started and finished since the last one, and come back with new work.

While running, one fetch is always outstanding: the control plane holds it until it has
work (it doubles as the heartbeat). When outcomes are ready while it is held, a second
fetch carries them; the control plane then answers the older one, empty unless dispatch
had already filled it. A fetch is never abandoned, so tasks put in a reply are never
lost, and a task costs the control plane one request in and one reply out.

Right after a fetch brings quick tasks (under ``QUICK`` on average), the subworker waits
up to ``QUICK`` for their outcomes before asking again, so the outcomes carry the next
request instead of an empty fetch going first and a second one following with them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from fastworker import ControlPlaneUnavailable, RequestRejected, Timeout
from fastworker_protocol import EncodeError, ErrorCode, Outcome, TaskError
from fastworker_subworker.link import ControlPlaneLink
from fastworker_subworker.runner import TaskRunner

log = structlog.get_logger(__name__)

STARTED_DELAY = 0.005
MAX_OUTSTANDING = 2
QUICK = 0.002


class Outbox:
    """Starts and outcomes waiting to be sent. Outcomes are news at once; a start only
    after ``STARTED_DELAY``, so a short task's start travels with its outcome."""

    def __init__(self) -> None:
        self._started: list[str] = []
        self._outcomes: list[Outcome] = []
        self.received: list[int] = []  # batches to confirm: they ride on the next request
        self._news = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None

    def started(self, task_ids: list[str]) -> None:
        self._started.extend(task_ids)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(STARTED_DELAY, self._news.set)

    def finished(self, outcomes: list[Outcome]) -> None:
        self._outcomes.extend(outcomes)
        self._news.set()

    @property
    def ready(self) -> bool:
        return self._news.is_set()

    @property
    def pending(self) -> int:
        return len(self._started) + len(self._outcomes)

    async def wait_ready(self) -> None:
        await self._news.wait()

    def take(self) -> tuple[list[str], list[Outcome]]:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._news.clear()
        taken = self._started, self._outcomes
        self._started, self._outcomes = [], []
        return taken

    def put_back(self, started: list[str], outcomes: list[Outcome]) -> None:
        self._started[:0], self._outcomes[:0] = started, outcomes
        if self.pending:
            self._news.set()


class Exchange:
    def __init__(
        self,
        outbox: Outbox,
        runner: TaskRunner,
        fetch_wait: float,
        on_unknown_worker: Callable[[], None],
        pause: Callable[[], Awaitable[None]],
    ) -> None:
        self.outbox = outbox
        self.link: ControlPlaneLink | None = None
        self._runner = runner
        self._fetch_wait = fetch_wait
        self._on_unknown_worker = on_unknown_worker
        self._pause = pause
        self._outstanding: set[asyncio.Task[None]] = set()
        self._quiet_until = 0.0

    async def run(
        self, until: asyncio.Event, *, hold: bool, ready: Callable[[], Awaitable[bool]]
    ) -> None:
        """Exchange until ``until`` is set. With ``hold``, keep a fetch outstanding for
        work; without (draining), send only when there is something to report."""
        loop = asyncio.get_running_loop()
        while not until.is_set():
            if not await ready():
                return
            wants_work = hold and not self._outstanding
            if self.outbox.ready and len(self._outstanding) < MAX_OUTSTANDING:
                self._send()
            elif wants_work and loop.time() < self._quiet_until:
                await self._next_change(until, timeout=self._quiet_until - loop.time())
            elif wants_work:
                self._send()
            else:
                await self._next_change(until)

    async def settle(self, timeout: float) -> None:
        """Send whatever is left and wait for every outstanding fetch (bounded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (self.outbox.pending or self._outstanding) and loop.time() < deadline:
            if self.outbox.pending and len(self._outstanding) < MAX_OUTSTANDING:
                self._send()
            await asyncio.wait(
                self._outstanding,
                timeout=deadline - loop.time(),
                return_when=asyncio.FIRST_COMPLETED,
            )

    def _send(self) -> None:
        started, outcomes = self.outbox.take()
        received, self.outbox.received = self.outbox.received, []
        task = asyncio.get_running_loop().create_task(self._exchange(started, outcomes, received))
        self._outstanding.add(task)
        task.add_done_callback(self._outstanding.discard)

    async def _next_change(self, until: asyncio.Event, timeout: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        watchers: list[asyncio.Task[Any]] = [loop.create_task(until.wait())]
        if len(self._outstanding) < MAX_OUTSTANDING:
            watchers.append(loop.create_task(self.outbox.wait_ready()))
        try:
            await asyncio.wait(
                [*self._outstanding, *watchers],
                timeout=timeout,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)

    async def _exchange(
        self, started: list[str], outcomes: list[Outcome], received: list[int]
    ) -> None:
        assert self.link is not None
        while True:
            try:
                reply = await self.link.fetch(
                    self._fetch_wait, self._runner.prefetch_hint(), started, outcomes, received
                )
            except EncodeError as exc:  # too large: nothing was sent
                if len(outcomes) > 1:
                    half = len(outcomes) // 2
                    self.outbox.put_back([], outcomes[half:])
                    outcomes = outcomes[:half]
                elif outcomes:
                    outcomes = [_too_large(outcomes[0], exc)]
                else:  # only started ids, and too many of them: they are only a courtesy
                    log.error("started notices dropped", count=len(started), error=str(exc))
                    started = []
                continue
            except RequestRejected as exc:
                if exc.code == ErrorCode.UNKNOWN_WORKER:
                    # The control plane restarted and no longer knows these tasks: their
                    # outcomes have nowhere to go. Register again and carry on.
                    self._on_unknown_worker()
                else:
                    log.error("fetch rejected", code=exc.code, error=exc.message)
                    self.outbox.put_back(started, outcomes)
                    await self._pause()
                return
            except (ControlPlaneUnavailable, Timeout):
                self.outbox.put_back(started, outcomes)
                self.outbox.received[:0] = received
                await self._pause()
                return
            if reply.batch:
                self.outbox.received.append(reply.batch)
            if reply.cancel:
                self._runner.cancel(reply.cancel)
            self._runner.submit(reply.tasks)
            mean = self._runner.mean_duration
            if reply.tasks and mean is not None and mean < QUICK:
                self._quiet_until = asyncio.get_running_loop().time() + QUICK
            return

    def close(self) -> None:
        for task in self._outstanding:
            task.cancel()


def _too_large(outcome: Outcome, exc: EncodeError) -> Outcome:
    return Outcome(
        task_id=outcome.task_id,
        ok=False,
        error=TaskError(type="ResultTooLarge", message=str(exc), reason="unserializable_result"),
        started_at=outcome.started_at,
        finished_at=outcome.finished_at,
    )
