"""What a candidate publishes with its campaign, and what a follower announces from it.

A term carries its leader's addresses as ``key=value`` strings (the coordinators store
a flat list: etcd in the key's JSON value, Kubernetes in a comma-joined annotation, so
no value may contain a comma): ``replication``, ``registration``, ``results``, ``http``
and ``submit`` once per priority, most urgent first. A follower turns its leader's term
into the leader's ``Announce``: every replica's discovery port then leads peers to the
leader. The instance id is the leader's candidate id and epoch, the same on every
replica, so peers see one control plane per term however many replicas they hear.
"""

from __future__ import annotations

from fastworker_control_plane.election import Term
from fastworker_protocol import Announce

REPLICATION = "replication"


def instance_id(candidate_id: str, epoch: int) -> str:
    """The control plane's instance id for a term: new every term, known to followers."""
    return f"{candidate_id}.{epoch}"


def published(announce: Announce, replication: str) -> tuple[str, ...]:
    """The addresses a candidate campaigns with: its announcement's, and ``replication``."""
    entries = [
        f"{REPLICATION}={replication}",
        f"registration={announce.registration}",
        f"results={announce.results}",
        *(f"submit={address}" for address in announce.submit),
    ]
    if announce.http:
        entries.append(f"http={announce.http}")
    return tuple(entries)


def _entries(term: Term) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for entry in term.addresses:
        key, sep, value = entry.partition("=")
        if sep and value:
            found.setdefault(key, []).append(value)
    return found


def replication_address(term: Term) -> str | None:
    return next(iter(_entries(term).get(REPLICATION, [])), None)


def announcement(term: Term, version: str) -> Announce | None:
    """The leader's ``Announce`` for ``term``; None if the term does not say enough (a
    candidate of another version, say): a follower then announces nothing."""
    found = _entries(term)
    submit = found.get("submit", [])
    registration = found.get("registration", [])
    results = found.get("results", [])
    if not submit or not registration or not results:
        return None
    http = found.get("http", [])
    return Announce(
        instance_id=instance_id(term.leader_id, term.epoch),
        submit=submit,
        results=results[0],
        registration=registration[0],
        http=http[0] if http else None,
        version=version,
        epoch=term.epoch,
    )
