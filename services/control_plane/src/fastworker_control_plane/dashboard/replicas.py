"""``GET /api/replicas`` and the dashboard's Replicas panel (docs/http-api.md): the
replicas of a replicated control plane, as its leader sees them: its term, how it
acknowledges writes, and each follower's sync state and lag.

Followers serve no dashboard, so a leader's page is where replicas show. ``document`` is
pure (a ``ReplicaSet`` in, a plain dict out); ``reader`` takes one from a live leader at
each request. Nothing here changes the replication it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastworker_control_plane.ha.leader import FollowerStatus, LeaderReplication, Leadership
from fastworker_control_plane.replication.tracker import Mode


@dataclass(frozen=True)
class ReplicaSet:
    """A leader and its followers at one moment."""

    leader: str  # the leader's replica name (--replica-id), as followers are named
    candidate: str  # its candidate id in the election (``/readyz``'s "replica")
    epoch: int
    mode: Mode
    sync_replicas: int
    followers: Sequence[FollowerStatus]


Reader = Callable[[], ReplicaSet | None]  # None: a control plane alone


def alone() -> ReplicaSet | None:
    return None


def document(replicas: ReplicaSet | None) -> dict[str, Any]:
    """The leader first, then its followers by name (out-of-sync ones included: a
    follower that stopped stays listed, falling behind)."""
    if replicas is None:
        return {"replicated": False}
    leader = {"name": replicas.leader, "role": "leader", "candidate": replicas.candidate}
    followers = sorted(replicas.followers, key=lambda f: f.name)
    return {
        "replicated": True,
        "epoch": replicas.epoch,
        "mode": replicas.mode.value,
        "sync_replicas": replicas.sync_replicas,
        "replicas": [leader, *(_follower(f) for f in followers)],
    }


def _follower(status: FollowerStatus) -> dict[str, Any]:
    return {
        "name": status.name,
        "role": "follower",
        "in_sync": status.in_sync,
        "lag_frames": status.lag.frames,
        "lag_bytes": status.lag.bytes,
        "lag_seconds": status.lag.seconds,
    }


def reader(
    name: str, leadership: Leadership | None, replication: LeaderReplication | None
) -> Reader:
    """What a control plane's routes call for its replicas: ``alone`` unless it leads
    replicas (``name``: its ``--replica-id``)."""
    if leadership is None or replication is None:
        return alone

    def read() -> ReplicaSet:
        return ReplicaSet(
            leader=name,
            candidate=leadership.candidate_id,
            epoch=leadership.epoch,
            mode=replication.mode,
            sync_replicas=replication.settings.sync_replicas,
            followers=replication.followers(),
        )

    return read
