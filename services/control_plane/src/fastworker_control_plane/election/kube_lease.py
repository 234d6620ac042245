"""client-go's leader election on a ``coordination.k8s.io/v1`` Lease, as a pure state machine.

Given the Lease as read (or None when it does not exist) and the time, ``LeaseCandidate``
decides what to write, or to wait, or that the term is lost; the driver reports back
whether the write landed. No I/O and no clock of its own: ``now`` is monotonic seconds,
``wall`` the UTC time written into ``acquireTime``/``renewTime`` for people and tools.

The rules, as in client-go's ``tryAcquireOrRenew``:

* A Lease another candidate holds is expired only when this candidate has watched it stay
  unchanged for ``leaseDurationSeconds`` of its *own* clock, counted from the moment it first
  saw that version. Other nodes' wall clocks (``renewTime``) are never compared with ours,
  so clock skew between nodes cannot make a live lease look expired.
* An empty ``holderIdentity`` means released: anyone may acquire at once.
* Acquiring (a holder change) sets ``acquireTime`` and adds one to ``leaseTransitions``;
  renewing keeps both and moves ``renewTime``.
* Every write carries the ``resourceVersion`` read, so of two candidates writing the same
  version one gets 409 Conflict: it must read again, never retry the write blindly.
* A leader that has not renewed within ``renew_deadline`` of the start of its last
  successful attempt has lost, whatever the Lease says.

Two deliberate differences from client-go, both for fencing (the epoch is
``leaseTransitions + 1``, so the first term is 1 (0 means "not replicated" on the wire),
and must grow with every term): a candidate that does not currently
lead treats a Lease still held under its own identity like anyone else's (it waits for
expiry, then acquires with transitions + 1) instead of renewing it; and a Lease that does not
exist is created with ``leaseTransitions`` 0, so deleting the Lease object restarts epochs
(never delete it while followers hold frames of a live term).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fastworker_control_plane.election.settings import LeaseTiming
from fastworker_control_plane.election.terms import Term


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The fields of a Lease's spec this election reads and writes, and its version."""

    holder: str
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    lease_transitions: int
    resource_version: str = ""
    # Not part of the Lease spec: the candidate's addresses, kept in an annotation.
    addresses: tuple[str, ...] = ()
    # The object's labels, written back unchanged (a Helm chart finds its objects by them).
    labels: tuple[tuple[str, str], ...] = ()

    def term(self) -> Term | None:
        if not self.holder:
            return None
        return Term(self.holder, epoch_of(self.lease_transitions), self.addresses)


def epoch_of(transitions: int) -> int:
    """A term's epoch from its Lease's ``leaseTransitions`` (the first term is 1)."""
    return transitions + 1


@dataclass(frozen=True, slots=True)
class Create:
    """The Lease does not exist: create it (a 409 means someone else just did)."""

    record: LeaseRecord


@dataclass(frozen=True, slots=True)
class Update:
    """Replace the Lease at ``record.resource_version``; ``acquiring`` tells a new term."""

    record: LeaseRecord
    acquiring: bool


@dataclass(frozen=True, slots=True)
class Wait:
    """Another candidate holds an unexpired Lease (``leader``), or the read failed."""

    leader: Term | None


@dataclass(frozen=True, slots=True)
class Lost:
    """The term we led is over; stop acting as leader, then act on ``then``."""

    reason: str
    then: Create | Update | Wait | None


Decision = Create | Update | Wait | Lost


class LeaseCandidate:
    """One candidate's view of one Lease; feed it reads and write outcomes."""

    def __init__(self, identity: str, timing: LeaseTiming, addresses: tuple[str, ...] = ()) -> None:
        if not identity:
            raise ValueError("a candidate needs a non-empty identity")
        self.identity = identity
        self.timing = timing
        self.addresses = tuple(addresses)
        self.leading: Term | None = None
        self.renewed_at = 0.0
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0

    @property
    def lease_seconds(self) -> int:
        # Lease durations are whole seconds on the API; round up so we never promise less.
        return max(1, -(-int(self.timing.lease_duration * 1000) // 1000))

    def expired_at(self, now: float) -> bool:
        """Whether the term we lead is past its renew deadline at ``now``."""
        return self.leading is not None and now >= self.renewed_at + self.timing.renew_deadline

    def decide(self, read: LeaseRecord | None, now: float, wall: datetime) -> Decision:
        """What to do with the Lease as just read, at the start of an attempt at ``now``."""
        if self.expired_at(now):
            return self._lose("renew deadline passed", read, now, wall)
        if read is None:
            if self.leading is not None:
                return self._lose("lease deleted", read, now, wall)
            return Create(self._record(wall, wall, 0, ""))
        self._observe(read, now)
        if self.leading is not None:
            if (
                read.holder == self.identity
                and epoch_of(read.lease_transitions) == self.leading.epoch
            ):
                return Update(
                    self._record(read.acquire_time, wall, read.lease_transitions, read),
                    acquiring=False,
                )
            return self._lose(f"lease taken by {read.holder or 'no one'}", read, now, wall)
        if read.holder and now < self._observed_at + read.lease_duration_seconds:
            return Wait(read.term())
        return Update(self._record(wall, wall, read.lease_transitions + 1, read), acquiring=True)

    def written(self, record: LeaseRecord, started_at: float) -> Term | None:
        """The write of an attempt started at ``started_at`` landed as ``record``.

        Returns the term when this write began it (we just became leader), else None.
        """
        self._observe(record, started_at)
        if self.leading is not None and self.expired_at(started_at):
            return None
        new = self.leading is None
        self.leading = Term(self.identity, epoch_of(record.lease_transitions), self.addresses)
        self.renewed_at = max(self.renewed_at, started_at) if not new else started_at
        return self.leading if new else None

    def abdicate(self) -> None:
        """Forget our term: the driver's fence already reported it lost, or we resign."""
        self.leading = None

    def released(self, wall: datetime, read: LeaseRecord) -> LeaseRecord | None:
        """The write that gives up our term (client-go's ReleaseOnCancel), if we hold it."""
        term, self.leading = self.leading, None
        if (
            term is None
            or read.holder != self.identity
            or epoch_of(read.lease_transitions) != term.epoch
        ):
            return None
        return LeaseRecord(
            holder="",
            lease_duration_seconds=1,
            acquire_time=wall,
            renew_time=wall,
            lease_transitions=read.lease_transitions,
            resource_version=read.resource_version,
            labels=read.labels,
        )

    def _lose(self, reason: str, read: LeaseRecord | None, now: float, wall: datetime) -> Lost:
        self.leading = None
        then = self.decide(read, now, wall)  # as a non-leader: never another Lost
        assert not isinstance(then, Lost)
        return Lost(reason, then)

    def _observe(self, read: LeaseRecord, now: float) -> None:
        if self._observed is None or _changed(self._observed, read):
            self._observed = read
            self._observed_at = now

    def _record(
        self,
        acquired: datetime | None,
        wall: datetime,
        transitions: int,
        read: LeaseRecord | str,
    ) -> LeaseRecord:
        version = read if isinstance(read, str) else read.resource_version
        labels = () if isinstance(read, str) else read.labels
        return LeaseRecord(
            holder=self.identity,
            lease_duration_seconds=self.lease_seconds,
            acquire_time=acquired,
            renew_time=wall,
            lease_transitions=transitions,
            resource_version=version,
            addresses=self.addresses,
            labels=labels,
        )


def _changed(before: LeaseRecord, after: LeaseRecord) -> bool:
    if before.resource_version and after.resource_version:
        return before.resource_version != after.resource_version
    return (before.holder, before.renew_time, before.lease_transitions) != (
        after.holder,
        after.renew_time,
        after.lease_transitions,
    )
