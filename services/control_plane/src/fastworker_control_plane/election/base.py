"""The ``Elector`` interface the control plane uses, and the event feed its backends share.

An elector never acts for the caller: it reports changes, and answers ``leading()`` from
its local fencing clock, which the caller must consult before every act of a leader.

A backend's campaign runs as a supervised task (``fastworker_common.supervision``): an
error is logged and the campaign retried every retry period, except a
``CoordinatorRefused`` (credentials or permissions), which no retry can fix: the term is
lost and ``events()`` raises ``ElectionFailed``.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from fastworker_common.supervision import Fault, Restart, Supervisor
from fastworker_control_plane.election.errors import (
    CoordinatorRefused,
    ElectionError,
    ElectionFailed,
)
from fastworker_control_plane.election.settings import LeaseTiming
from fastworker_control_plane.election.terms import (
    BecameLeader,
    ElectionEvent,
    LostLeadership,
    ObservedLeader,
    Tenure,
    Term,
)

Clock = Callable[[], float]


class Elector(abc.ABC):
    """A candidate for leadership of one election.

    ``start()`` begins campaigning; ``events()`` yields every change in order;
    ``leading()`` says whether this candidate may act as leader *now*; ``resign()`` gives a
    term up and stops campaigning (``start()`` resumes); ``close()`` resigns and ends
    ``events()``; a campaign ended for good makes ``events()`` raise ``ElectionFailed``.
    """

    def __init__(
        self,
        candidate_id: str,
        addresses: tuple[str, ...] = (),
        timing: LeaseTiming | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        if not candidate_id:
            raise ValueError("a candidate needs a non-empty id")
        self.candidate_id = candidate_id
        self.addresses = tuple(addresses)
        self.timing = timing or LeaseTiming()
        self.clock = clock
        self._events: asyncio.Queue[ElectionEvent | ElectionFailed | None] = asyncio.Queue()
        self._supervisor = Supervisor(self._failed, permanent=(CoordinatorRefused,))
        self._campaign: asyncio.Task[None] | None = None
        self._tenure: Tenure | None = None
        self._observed: Term | None = None
        self._fence_timer: asyncio.TimerHandle | None = None
        self._closed = False

    # what the caller uses

    @abc.abstractmethod
    async def start(self) -> None:
        """Begin (or resume) campaigning; returns at once."""

    @abc.abstractmethod
    async def resign(self) -> None:
        """Give up the current term, if any, so another candidate may lead; stop campaigning."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Resign, release every resource and end ``events()``."""

    @abc.abstractmethod
    async def watch(self) -> None:
        """Follow who leads without campaigning; returns at once."""

    async def depose(self, term: Term) -> bool:
        """End ``term`` before its lease runs out, for a leader proven gone: True if it
        ended. Refused while that term has marked itself acknowledging alone
        (``record_alone``): its followers may lack what it acknowledged. A backend
        that cannot do it safely says False, and the term ends with its lease."""
        return False

    async def record_alone(self, alone: bool) -> bool:
        """Mark in the coordinator, before the leader acknowledges without its followers,
        that it may (``alone``), or clear the mark once they have it all; False if this
        candidate no longer leads. Where no term is ever deposed early nothing needs
        marking."""
        return self.leading() is not None

    def leading(self) -> Term | None:
        """The term this candidate leads right now, or None: check before every leader act."""
        tenure = self._tenure
        if tenure is None:
            return None
        if not tenure.valid(self.clock()):
            self._lose("renew deadline passed")
            return None
        return tenure.term

    @property
    def leader(self) -> Term | None:
        """The last term seen, ours or another's (None when there is no known leader)."""
        own = self.leading()
        return own if own is not None else self._observed

    async def events(self) -> AsyncIterator[ElectionEvent]:
        """Every change, in order, until ``close()``."""
        while True:
            event = await self._events.get()
            if event is None:
                return
            if isinstance(event, ElectionFailed):
                raise event
            yield event

    # what backends use

    def _start_campaign(self, name: str, attempt: Callable[[], Awaitable[None]]) -> None:
        """Run ``attempt`` again and again (``retry_period`` after an error) until
        ``_stop_campaign``; a ``CoordinatorRefused`` ends it for good."""
        if self._closed:
            raise ElectionError("this elector is closed")
        if self._supervisor.fault is not None:
            raise ElectionFailed(str(self._supervisor.fault))
        if self._campaign is None or self._campaign.done():
            retry = Restart(self.timing.retry_period, expected=(ElectionError,))
            self._campaign = self._supervisor.keep(name, attempt, retry)

    async def _stop_campaign(self) -> None:
        campaign, self._campaign = self._campaign, None
        await self._supervisor.end(campaign)

    def _failed(self, fault: Fault) -> None:
        self._lose("the campaign ended for good")
        if not self._closed:
            failed = ElectionFailed(str(fault))
            failed.__cause__ = fault.error
            self._events.put_nowait(failed)

    def _emit(self, event: ElectionEvent) -> None:
        if not self._closed:
            self._events.put_nowait(event)

    def _win(self, term: Term, sent_at: float) -> None:
        self._tenure = Tenure.begin(term, sent_at, self.timing.renew_deadline)
        self._observed = None
        self._emit(BecameLeader(term))
        self._arm_fence()

    def _renewed(self, sent_at: float) -> bool:
        """Record a renewal; False when it came too late (the term is already lost)."""
        if self.leading() is None or self._tenure is None:
            return False
        self._tenure.renewed(sent_at)
        self._arm_fence()
        return True

    def _lose(self, reason: str) -> Term | None:
        tenure, self._tenure = self._tenure, None
        if self._fence_timer is not None:
            self._fence_timer.cancel()
            self._fence_timer = None
        if tenure is None:
            return None
        self._emit(LostLeadership(tenure.term, reason))
        return tenure.term

    def _observe(self, term: Term | None) -> None:
        if term != self._observed:
            self._observed = term
            self._emit(ObservedLeader(term))

    def _end_events(self) -> None:
        if not self._closed:
            self._events.put_nowait(None)
            self._closed = True

    def _arm_fence(self) -> None:
        # Report loss at the deadline even when no renewal attempt returns (a hung request,
        # a paused process): the event loop runs this as soon as it runs anything.
        if self._fence_timer is not None:
            self._fence_timer.cancel()
        tenure = self._tenure
        if tenure is None:
            return
        delay = max(0.0, tenure.valid_until - self.clock())
        self._fence_timer = asyncio.get_running_loop().call_later(delay, self._check_fence)

    def _check_fence(self) -> None:
        self._fence_timer = None
        tenure = self._tenure
        if tenure is None:
            return
        if tenure.valid(self.clock()):
            self._arm_fence()
        else:
            self._lose("renew deadline passed")
