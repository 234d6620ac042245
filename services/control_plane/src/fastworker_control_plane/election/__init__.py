"""Leader election for replicated control planes, by an existing coordination service.

FastWorker never runs consensus of its own: etcd v3 (a lease and a create-if-absent
transaction on ``<prefix>/leader``) or a Kubernetes ``coordination.k8s.io/v1`` Lease (with
client-go's leader-election rules) decides who leads. This package only elects; it does not
replicate, serve or fence anything by itself.

Use::

    elector = elector_from_url("etcd://127.0.0.1:2379/fastworker", "cp-0", ("10.0.0.5:5555",))
    await elector.start()
    async for event in elector.events():
        ...  # BecameLeader(term) / LostLeadership(term, reason) / ObservedLeader(term | None)

What a term guarantees
    ``Term(leader_id, epoch, addresses)``. The epoch comes from the coordinator (etcd: the
    leader key's create revision; Kubernetes: ``leaseTransitions``) and every later term has
    a strictly greater one, so a follower can refuse anything stamped with an older epoch.

Timing (client-go semantics)
    ``lease_duration`` (default 5 s): how long a term survives without renewal.
    ``renew_deadline`` (default 2/3 of it): a leader that has not renewed within this long
    of its last successful renewal's *request* reports ``LostLeadership`` at once, a third of
    a lease before the coordinator could hand the term to someone else.
    ``retry_period`` (default 1/5 of it): how often a leader renews and a candidate retries.

What the caller must do (fencing)
    Act as leader only while ``elector.leading()`` returns a term, and check it before each
    acknowledgement: it reads the local monotonic clock, so a process paused past its
    deadline (SIGSTOP, a long GC) sees None on its first check after waking, even before
    the ``LostLeadership`` event is delivered. Stamp replicated frames with the term's
    epoch. On ``LostLeadership`` stop serving as leader immediately. Clock *rates* must
    agree within the margin ``lease_duration - renew_deadline``; wall clocks need not agree.

Candidate ids
    Use an id unique to the process incarnation (pod name plus start time, say): the
    Kubernetes backend treats a Lease held under its own id that it does not remember
    winning as someone else's, waiting for it to expire, so a restarted process never
    inherits a term a paused twin might still believe in.

Unproven here
    The Kubernetes backend's rules are unit-tested as a pure state machine and its driver
    over an in-memory API server; its HTTP calls to a real API server are not exercised.

What it must never do: decide leadership by itself, or report a term as led after its
renew deadline.
"""

from __future__ import annotations

from fastworker_control_plane.election.base import Elector
from fastworker_control_plane.election.errors import (
    Conflict,
    CoordinatorRefused,
    CoordinatorRejected,
    CoordinatorUnavailable,
    ElectionError,
    ElectionFailed,
)
from fastworker_control_plane.election.factory import elector_from_url
from fastworker_control_plane.election.settings import (
    EtcdTarget,
    KubernetesTarget,
    LeaseTiming,
    parse_election_url,
)
from fastworker_control_plane.election.terms import (
    BecameLeader,
    ElectionEvent,
    LostLeadership,
    ObservedLeader,
    Term,
)

__all__ = [
    "BecameLeader",
    "Conflict",
    "CoordinatorRefused",
    "CoordinatorRejected",
    "CoordinatorUnavailable",
    "ElectionError",
    "ElectionEvent",
    "ElectionFailed",
    "Elector",
    "EtcdTarget",
    "KubernetesTarget",
    "LeaseTiming",
    "LostLeadership",
    "ObservedLeader",
    "Term",
    "elector_from_url",
    "parse_election_url",
]
