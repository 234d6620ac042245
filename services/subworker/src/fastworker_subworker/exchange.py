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

Outcomes are never dropped because a fetch failed. A control plane that answers
``unknown_worker`` (it restarted, or expelled this worker after a silence longer than its
heartbeat timeout) may still know those tasks: the subworker registers again and sends
the outcomes with its next fetch. One that rejects the fetch otherwise (``internal``: say
its journal cannot be written) is alive but refusing, so the same outcomes go again after
a pause that doubles with each rejection (``Backoff``). One that refuses the token
(``unauthorized``) will refuse every retry: ``run`` raises it, and nothing more is sent.

Where the link speaks NNG itself, the exchange lends the fetch role to the quick lane
(``quick_lane``) while nothing else is held and the tasks measured are quick: the lane
then fetches and runs them on one blocking thread, and the loop only watches for a task
that runs long (``STUCK``). Whatever the lane gives back with the role (tasks it does not
run, cancels, outcomes, a failed fetch) is handled here as a fetch's own would be.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from fastworker import ControlPlaneUnavailable, RequestRejected, Timeout, Unauthorized
from fastworker_protocol import EncodeError, ErrorCode, FailureReason, Outcome, TaskError
from fastworker_subworker.link import ControlPlaneLink
from fastworker_subworker.quick_lane import LANE_QUICK, STUCK, Handback, QuickLane
from fastworker_subworker.runner import TaskRunner

log = structlog.get_logger(__name__)

STARTED_DELAY = 0.005
MAX_OUTSTANDING = 2
QUICK = 0.002
RETRY_PAUSE = 0.5  # after a failed fetch; after rejections, doubled up to MAX_RETRY_PAUSE
MAX_RETRY_PAUSE = 10.0

Pause = Callable[[float], Awaitable[None]]


class Backoff:
    """Pauses before sending rejected news again: ``RETRY_PAUSE``, doubling with each
    rejection up to ``MAX_RETRY_PAUSE``, and back to the start once a fetch goes through."""

    def __init__(self, first: float = RETRY_PAUSE, cap: float = MAX_RETRY_PAUSE) -> None:
        self._first, self._cap = first, cap
        self._next = first

    def next(self) -> float:
        delay = self._next
        self._next = min(self._cap, delay * 2)
        return delay

    def reset(self) -> None:
        self._next = self._first


class Outbox:
    """Starts and outcomes waiting to be sent. Outcomes are news at once; a start only
    after ``STARTED_DELAY``, so a short task's start travels with its outcome."""

    def __init__(self) -> None:
        self._started: list[str] = []
        self._outcomes: list[Outcome] = []
        self.received: list[int] = []  # batches to confirm: they ride on the next request
        self._news = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self.on_news: Callable[[], None] | None = None  # told whenever news becomes ready

    def started(self, task_ids: list[str]) -> None:
        self._started.extend(task_ids)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(STARTED_DELAY, self._set_news)

    def finished(self, outcomes: list[Outcome]) -> None:
        self._outcomes.extend(outcomes)
        self._set_news()

    def _set_news(self) -> None:
        self._news.set()
        if self.on_news is not None:
            self.on_news()

    @property
    def ready(self) -> bool:
        return self._news.is_set()

    @property
    def unreported(self) -> list[str]:
        """The ids of the tasks whose outcome is waiting to go."""
        return [outcome.task_id for outcome in self._outcomes]

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
            self._set_news()


class Exchange:
    def __init__(
        self,
        outbox: Outbox,
        runner: TaskRunner,
        fetch_wait: float,
        on_unknown_worker: Callable[[], None],
        pause: Pause,
        *,
        quick_lane: bool = True,
    ) -> None:
        self.outbox = outbox
        self.link: ControlPlaneLink | None = None
        self._runner = runner
        self._fetch_wait = fetch_wait
        self._on_unknown_worker = on_unknown_worker
        self._pause = pause
        self._backoff = Backoff()
        self.refused: Unauthorized | None = None  # the token was refused: send nothing more
        self._outstanding: set[asyncio.Task[None]] = set()
        self._quiet_until = 0.0
        # What ``run`` waits on between turns: resolved by news, a fetch ending, ``until``
        # or a timer. One future per wait, where waiting on each of those with a task of
        # its own cost a task per source per turn, twice per task run.
        self._wake: asyncio.Future[None] | None = None
        outbox.on_news = self._poke
        self._lane = (
            QuickLane(
                runner.executor,
                runner.durations,
                runner.prefetch_hint,
                fetch_wait,
                self._handed_back,
            )
            if quick_lane
            else None
        )

    @property
    def lane_runs(self) -> int:
        """Tasks the quick lane has run itself."""
        return 0 if self._lane is None else self._lane.ran

    @property
    def lane_lent(self) -> bool:
        """The quick lane has the fetch role now."""
        return self._lane is not None and self._lane.lent

    async def run(
        self, until: asyncio.Event, *, hold: bool, ready: Callable[[], Awaitable[bool]]
    ) -> None:
        """Exchange until ``until`` is set. With ``hold``, keep a fetch outstanding for
        work; without (draining), send only when there is something to report. Raises
        ``Unauthorized`` once the control plane has refused the token."""
        loop = asyncio.get_running_loop()
        stopping = loop.create_task(until.wait())
        stopping.add_done_callback(self._poke)
        try:
            while not until.is_set():
                if self.refused is not None:
                    raise self.refused
                if not await ready():
                    return
                if self._lane is not None and self._lane.lent:
                    await self._watch_lane(self._lane)
                    continue
                wants_work = hold and not self._outstanding
                if hold and self._may_lend():
                    assert self._lane is not None
                    assert self.link is not None
                    started, outcomes = self.outbox.take()
                    received, self.outbox.received = self.outbox.received, []
                    self._lane.lend(self.link, started, outcomes, received)
                elif self.outbox.ready and len(self._outstanding) < MAX_OUTSTANDING:
                    self._send()
                elif wants_work and loop.time() < self._quiet_until:
                    await self._next_change(timeout=self._quiet_until - loop.time())
                elif wants_work:
                    self._send()
                else:
                    await self._next_change()
        finally:
            stopping.cancel()
            self._recall_lane()

    def _may_lend(self) -> bool:
        """Whether the quick lane should fetch now (with the news there is): it can, no
        fetch is out, no task is held, and the tasks measured so far are quick."""
        lane, link, runner = self._lane, self.link, self._runner
        mean = runner.mean_duration
        return (
            lane is not None
            and lane.free
            and link is not None
            and link.blocks
            and mean is not None
            and mean < LANE_QUICK
            and not runner.held
            and not self._outstanding
        )

    async def _watch_lane(self, lane: QuickLane) -> None:
        """While the lane fetches: take the role back for news of the loop's own, or
        from a task that runs long."""
        if self.outbox.ready:
            self._recall_lane()  # back once its fetch ends: wait for that, not spin
        await self._next_change(timeout=STUCK)
        back = lane.detach_if_stuck()
        if back is not None:
            self._handed_back(back)

    def _recall_lane(self) -> None:
        """Have the role back: now if the lane is running a task, else when its fetch
        ends (at once if the control plane answers it, as a drain makes it)."""
        if self._lane is not None and self._lane.lent:
            back = self._lane.recall()
            if back is not None:
                self._handed_back(back)

    def _handed_back(self, back: Handback) -> None:
        """The lane gave the role back: what it held is the loop's to run and send."""
        if back.detached is not None:
            assert back.detached_outcome is not None
            self.outbox.started([back.detached.assignment.id])
            self._runner.adopt(back.detached, back.detached_outcome)
        if back.error is not None:
            failing = asyncio.get_running_loop().create_task(
                self._failed(back.error, back.started, back.outcomes, back.received)
            )
            self._outstanding.add(failing)
            failing.add_done_callback(self._fetch_ended)
        else:
            self.outbox.received.extend(back.received)
            self.outbox.put_back(back.started, back.outcomes)
        if back.tasks:
            self._runner.submit(back.tasks)
        if back.cancel:
            self._runner.cancel(back.cancel)
        self._poke()

    async def settle(self, timeout: float, registered: Callable[[], bool] = lambda: True) -> None:
        """Send whatever is left and wait for every outstanding fetch (bounded). Nothing
        is sent while not ``registered()``: it would only come back ``unknown_worker``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self._recall_lane()
        while self.lane_lent and loop.time() < deadline:
            await self._next_change(timeout=deadline - loop.time())
        while (self.outbox.pending or self._outstanding) and loop.time() < deadline:
            if self.refused is not None:
                return
            if self.outbox.pending and len(self._outstanding) < MAX_OUTSTANDING and registered():
                self._send()
            elif not self._outstanding:
                return  # news, but nowhere to send it
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
        task.add_done_callback(self._fetch_ended)

    def _fetch_ended(self, task: asyncio.Task[None]) -> None:
        self._outstanding.discard(task)
        self._poke()

    def _poke(self, *_: object) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def _next_change(self, timeout: float | None = None) -> None:
        """Until news is ready, a fetch ends, ``until`` is set or ``timeout`` passes
        (whichever first; the caller looks again at what changed, if anything did)."""
        loop = asyncio.get_running_loop()
        wake = self._wake = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, self._poke)
        try:
            await wake
        finally:
            self._wake = None
            if timer is not None:
                timer.cancel()

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
            except (RequestRejected, ControlPlaneUnavailable, Timeout) as exc:
                await self._failed(exc, started, outcomes, received)
                return
            self._backoff.reset()
            if reply.batch:
                self.outbox.received.append(reply.batch)
            if reply.cancel:
                self._runner.cancel(reply.cancel)
            self._runner.submit(reply.tasks)
            mean = self._runner.mean_duration
            if reply.tasks and mean is not None and mean < QUICK:
                self._quiet_until = asyncio.get_running_loop().time() + QUICK
            return

    async def _failed(
        self, exc: Exception, started: list[str], outcomes: list[Outcome], received: list[int]
    ) -> None:
        """A fetch failed: keep what it carried for a later one, after the pause its
        failure calls for."""
        if isinstance(exc, RequestRejected):
            await self._rejected(exc, started, outcomes, received)
            return
        self.outbox.put_back(started, outcomes)
        self.outbox.received[:0] = received
        if isinstance(exc, EncodeError):  # the lane's: the loop's fetch splits what it carried
            return
        if not isinstance(exc, ControlPlaneUnavailable | Timeout):
            log.error("quick lane fetch failed", error=repr(exc))
        await self._pause(RETRY_PAUSE)

    async def _rejected(
        self, exc: RequestRejected, started: list[str], outcomes: list[Outcome], received: list[int]
    ) -> None:
        """Keep what a rejected fetch carried for a later one (all but what is moot)."""
        if exc.code == ErrorCode.UNKNOWN_WORKER:
            # Its starts and batch numbers belong to the registration it forgot, but the
            # outcomes are news: finished tasks it still knows need not run again.
            log.warning("unknown to the control plane; registering again", outcomes=len(outcomes))
            self.outbox.put_back([], outcomes)
            self._on_unknown_worker()
            return
        if isinstance(exc, Unauthorized):
            self.refused = exc  # ``run`` raises it: no retry is sent
            self.outbox.put_back(started, outcomes)
            return
        delay = self._backoff.next()
        log.error("fetch rejected", code=exc.code, error=exc.message, retry_in=delay)
        # Held here during the pause, so the other fetch does not send them meanwhile.
        await self._pause(delay)
        self.outbox.put_back(started, outcomes)
        self.outbox.received[:0] = received

    def close(self) -> None:
        for task in self._outstanding:
            task.cancel()
        if self._lane is not None:
            self._lane.close()


def _too_large(outcome: Outcome, exc: EncodeError) -> Outcome:
    return Outcome(
        task_id=outcome.task_id,
        ok=False,
        error=TaskError(
            type="ResultTooLarge", message=str(exc), reason=FailureReason.UNSERIALIZABLE_RESULT
        ),
        started_at=outcome.started_at,
        finished_at=outcome.finished_at,
    )
