"""Builds the ``Elector`` a ``--leader-election`` URL names."""

from __future__ import annotations

import time

from fastworker_control_plane.election.base import Clock, Elector
from fastworker_control_plane.election.settings import (
    DEFAULT_LEASE_DURATION,
    EtcdTarget,
    LeaseTiming,
    parse_election_url,
)


def elector_from_url(
    url: str,
    candidate_id: str,
    addresses: tuple[str, ...] = (),
    *,
    lease_duration: float = DEFAULT_LEASE_DURATION,
    renew_deadline: float | None = None,
    retry_period: float | None = None,
    clock: Clock = time.monotonic,
) -> Elector:
    """An elector for ``url``; ``ValueError`` for a bad URL or inconsistent timings."""
    target = parse_election_url(url)
    timing = LeaseTiming.from_lease(lease_duration, renew_deadline, retry_period)
    # Each backend is imported only when chosen: etcd's brings aiohttp, a part of every
    # control plane's start-up otherwise.
    if isinstance(target, EtcdTarget):
        from fastworker_control_plane.election.etcd import EtcdElector

        return EtcdElector(target, candidate_id, addresses, timing, clock)
    from fastworker_control_plane.election.kubernetes import KubernetesElector

    return KubernetesElector.in_cluster(target, candidate_id, addresses, timing, clock)
