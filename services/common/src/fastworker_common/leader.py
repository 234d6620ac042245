"""Following the leader of replicated control planes: the rules, with no I/O.

Two or three control planes may run as replicas of one: one leads (it alone answers
requests), the others mirror it and announce the *leader's* addresses, under its
``instance_id`` and ``epoch`` (its term; 0 means a control plane alone). So any replica
leads a peer to the leader, and a peer may dial them all (a comma-separated discovery
address).

A lagging replica may still announce a leader already replaced: a peer ignores an
announcement whose epoch is below the highest it has heard (``stale``). An epoch of 0 is
never stale: a control plane alone, started where replicas ran, must still be found.

A client that located the leader by discovery and loses it (no connection, no reply, or
``unavailable``: it is not the leader any more) looks on the discovery bus for its
successor (``succeeds``) and, once one announces itself, resends the same request there:
same task ids, so nothing is queued twice. :class:`Attempts` says how long it may look,
``back_when`` what ends a look early.
With epoch 0 nothing of this applies, and a call fails as it always did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import msgspec

from fastworker_common.errors import ControlPlaneUnavailable, LeaderUnavailable
from fastworker_protocol import Announce, Message

M = TypeVar("M", bound=Message)

SETTLE = 0.5  # seconds after a move before the next look: leaders never flap faster


def addresses(discovery: str) -> list[str]:
    """The addresses of a comma-separated discovery address (one, or one per replica)."""
    found = [a.strip() for a in discovery.split(",") if a.strip()]
    if not found:
        raise ValueError(f"no discovery address in {discovery!r}")
    return found


def stale(heard: Announce, highest: int) -> bool:
    """Whether ``heard`` names a leader older than the latest term heard (``highest``)."""
    return 0 < heard.epoch < highest


def succeeds(heard: Announce, current: Announce) -> bool:
    """Whether ``heard`` names a leader that replaced ``current``'s."""
    return heard.instance_id != current.instance_id and heard.epoch >= current.epoch


def follows(current: Announce | None, explicit_address: str | None) -> bool:
    """Whether a client on ``current`` looks for a new leader when it loses this one: only
    a replicated control plane found by discovery (not one dialed at an address given)."""
    return explicit_address is None and current is not None and current.epoch > 0


class Budget(Protocol):
    """One call's allowance of time and attempts (the client's ``Budget``)."""

    @property
    def total(self) -> float: ...

    @property
    def retries(self) -> int: ...

    @property
    def connect_timeout(self) -> float: ...

    def per_try(self, attempt: int, left: float) -> float: ...

    def give_up(self, attempt: int, elapsed: float, connected: bool) -> bool: ...


class Channel(Protocol):
    @property
    def connected(self) -> bool: ...


def back_when(failure: Exception, channel: Channel) -> Callable[[], bool] | None:
    """What ends a look for a new leader early, the leader being back: after a lost (or
    refused) connection, ``channel`` seen unconnected and then connected again, and the
    same leader is asked again. Not after ``unavailable`` (its connection never went), nor
    a missing reply (nor did it, maybe)."""
    if isinstance(failure, LeaderUnavailable) or not isinstance(failure, ControlPlaneUnavailable):
        return None
    lost = False  # a connection just reset may still be listed for a moment: wait to see it go

    def back() -> bool:
        nonlocal lost
        if not channel.connected:
            lost = True
            return False
        return lost

    return back


def rewait(message: M, wait: float | None, elapsed: float) -> M:
    """``message`` to send again ``elapsed`` seconds into a call that waits ``wait``: a
    held ``get`` or ``submit`` waits only for what is left of it."""
    if wait is None or getattr(message, "wait", None) is None:
        return message
    return msgspec.structs.replace(message, wait=max(0.0, wait - elapsed))


@dataclass
class Attempts:
    """One call's attempts, under its ``Budget``, with the time each may take and, when
    it fails, how long to look for a new leader before trying the same one again.

    Each attempt has a slot (``Budget.per_try``). A failed attempt looks until its slot
    ends, and at least ``connect_timeout`` (a reply that never came used up the slot; a
    failover is worth a look all the same); the last looks until the deadline. So a
    leader that only lost a reply is asked again, and a leader that is gone is followed
    whenever its successor shows up before the deadline. A move to a new leader is not an
    attempt: the request is resent at once, in the same slot arithmetic.
    """

    budget: Budget
    started: float
    attempt: int = 0
    _slot_end: float = field(default=0.0, repr=False)

    @property
    def deadline(self) -> float:
        return self.started + self.budget.total

    def timeout(self, now: float) -> float:
        """Seconds the attempt made at ``now`` may take."""
        per_try = self.budget.per_try(self.attempt, self.deadline - now)
        self._slot_end = now + per_try
        return per_try

    def look_until(self, now: float) -> float:
        """Until when a failed attempt looks for a new leader (a time like ``now``)."""
        if self.attempt >= self.budget.retries:
            return self.deadline
        return min(self.deadline, max(self._slot_end, now + self.budget.connect_timeout))

    def again(self, now: float, connected: bool, following: bool) -> bool:
        """After a failed attempt (and no new leader): whether to try again. A client
        following a leader does not give up at ``connect_timeout``: its look for the
        leader took that place, bounded by the deadline."""
        if self.budget.give_up(self.attempt, now - self.started, connected or following):
            return False
        self.attempt += 1
        return True
