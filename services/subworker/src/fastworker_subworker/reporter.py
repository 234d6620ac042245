"""Batching reports to the control plane: started notices and outcomes accumulate while a
``Report`` is in flight and go together in the next one (one in flight at a time), so a
busy subworker sends few large reports and an idle one reports at once.

Outcomes go at once. A started notice waits up to ``STARTED_DELAY``: a short task's start
then travels with its outcome instead of costing a round trip of its own, and a long
task still shows as running within a few milliseconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from fastworker import ControlPlaneUnavailable, RequestRejected, Timeout
from fastworker_protocol import EncodeError, ErrorCode, Outcome, TaskError

log = structlog.get_logger(__name__)

SendReport = Callable[[list[str], list[Outcome]], Awaitable[None]]
_RETRY_DELAY = 0.2
STARTED_DELAY = 0.005


class Reporter:
    def __init__(self, send: SendReport, on_unknown_worker: Callable[[], None]) -> None:
        self._send = send
        self._on_unknown_worker = on_unknown_worker
        self._started: list[str] = []
        self._outcomes: list[Outcome] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._started_timer: asyncio.TimerHandle | None = None

    def started(self, task_ids: list[str]) -> None:
        self._started.extend(task_ids)
        if self._started_timer is None:
            loop = asyncio.get_running_loop()
            self._started_timer = loop.call_later(STARTED_DELAY, self._started_due)

    def _started_due(self) -> None:
        self._started_timer = None
        self._wake.set()

    def finished(self, outcomes: list[Outcome]) -> None:
        self._outcomes.extend(outcomes)
        self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._started) + len(self._outcomes)

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            self._idle.clear()
            if self._started_timer is not None:  # they go now, with these outcomes
                self._started_timer.cancel()
                self._started_timer = None
            started, outcomes = self._started, self._outcomes
            self._started, self._outcomes = [], []
            try:
                await self._send_fitting(started, outcomes)
            except RequestRejected as exc:
                if exc.code == ErrorCode.UNKNOWN_WORKER:
                    # The control plane restarted and no longer knows these tasks, so
                    # their outcomes have nowhere to go; register again and carry on.
                    self._on_unknown_worker()
                else:
                    log.error("report rejected", code=exc.code, error=exc.message)
            except EncodeError as exc:  # only if even a one-line failure cannot be encoded
                log.error("report cannot be encoded; dropped", error=str(exc))
            except (ControlPlaneUnavailable, Timeout) as exc:
                log.warning("report failed; retrying", error=str(exc))
                self._started[:0], self._outcomes[:0] = started, outcomes
                self._wake.set()
                await asyncio.sleep(_RETRY_DELAY)
            finally:
                if not self.pending:
                    self._idle.set()

    async def _send_fitting(self, started: list[str], outcomes: list[Outcome]) -> None:
        """Send, halving a report that is too large to encode; a single outcome that is
        too large on its own is replaced by a failure saying so (encoding happens before
        anything is sent, so nothing goes twice)."""
        try:
            await self._send(started, outcomes)
        except EncodeError as exc:
            if len(outcomes) > 1:
                half = len(outcomes) // 2
                await self._send_fitting(started, outcomes[:half])
                await self._send_fitting([], outcomes[half:])
            elif outcomes:
                await self._send(started, [_too_large(outcomes[0], exc)])
            else:
                raise

    async def flush(self, timeout: float) -> bool:
        """Wait until everything queued so far has been sent; ``False`` on timeout."""
        if self.pending:
            self._idle.clear()
            self._wake.set()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True


def _too_large(outcome: Outcome, exc: EncodeError) -> Outcome:
    return Outcome(
        task_id=outcome.task_id,
        ok=False,
        error=TaskError(type="ResultTooLarge", message=str(exc), reason="unserializable_result"),
        started_at=outcome.started_at,
        finished_at=outcome.finished_at,
    )
