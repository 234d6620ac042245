"""What an election reports: terms, and the three changes a candidate sees. No I/O."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Term:
    """One leader's tenure: who leads, its fencing epoch, where to reach it.

    ``epoch`` comes from the coordinator (etcd's create revision of the leader key, the
    Lease's ``leaseTransitions``) and is strictly greater than that of every earlier term.
    """

    leader_id: str
    epoch: int
    addresses: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class BecameLeader:
    """This candidate now leads ``term``; it may act as leader while ``Elector.leading()``."""

    term: Term


@dataclass(frozen=True, slots=True)
class LostLeadership:
    """This candidate no longer leads ``term`` and must already have stopped acting as leader.

    ``reason`` is for people: "renew deadline passed", "key deleted", "resigned", ...
    """

    term: Term
    reason: str


@dataclass(frozen=True, slots=True)
class ObservedLeader:
    """Another candidate leads ``term``, or no one does (``term`` None)."""

    term: Term | None


ElectionEvent = BecameLeader | LostLeadership | ObservedLeader


@dataclass(slots=True)
class Tenure:
    """The local fencing clock of a term we lead.

    A renewal *sent* at time t proves the coordinator kept our lease until at least
    t + lease duration; we stop leading at t + renew deadline, which comes earlier, so a
    leader has fenced itself before anyone else can take its place. Times are monotonic.
    """

    term: Term
    renew_deadline: float
    valid_until: float

    @classmethod
    def begin(cls, term: Term, sent_at: float, renew_deadline: float) -> Tenure:
        return cls(term, renew_deadline, sent_at + renew_deadline)

    def renewed(self, sent_at: float) -> None:
        # A late answer to an old request must never shorten or wrongly extend the tenure.
        self.valid_until = max(self.valid_until, sent_at + self.renew_deadline)

    def valid(self, now: float) -> bool:
        return now < self.valid_until
