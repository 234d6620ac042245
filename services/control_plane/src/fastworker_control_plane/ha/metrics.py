"""A replica's Prometheus series: its role and term, and on the leader each follower's
lag and the in-sync count. Read at scrape time from the node (``ha.node``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from fastworker_control_plane.ha.node import ReplicatedControlPlane

ROLES = ("leader", "follower", "starting", "stepping down")


class ReplicaCollector(Collector):
    def __init__(self, node: ReplicatedControlPlane) -> None:
        self._node = node

    def collect(self) -> Iterator[Metric]:
        node = self._node
        role = GaugeMetricFamily(
            "fastworker_replica_role", "1 for this replica's current role", labels=["role"]
        )
        for name in ROLES:
            role.add_metric([name], 1 if node.role == name else 0)
        yield role
        yield GaugeMetricFamily(
            "fastworker_replica_epoch",
            "The newest leader term this replica has seen",
            value=node.epoch,
        )
        yield CounterMetricFamily(
            "fastworker_replica_failovers",
            "Leader terms this replica has seen begin after the first (each is a failover)",
            value=node.failovers,
        )
        link = node.link
        if link is not None:
            yield GaugeMetricFamily(
                "fastworker_replica_journal_bytes",
                "Bytes of the leader's journal this follower holds on disk",
                value=link.follower.durable,
            )
        yield from self._leader_series()

    def _leader_series(self) -> Iterator[Metric]:
        plane = self._node.leader
        replication = None if plane is None else plane.replication
        if replication is None:
            return
        in_sync = GaugeMetricFamily(
            "fastworker_replication_in_sync",
            "Followers in sync (acknowledgements wait for --sync-replicas of them)",
            value=len(replication.tracker.in_sync),
        )
        yield in_sync
        mode = GaugeMetricFamily(
            "fastworker_replication_mode",
            "1 for how writes are acknowledged: replicated, alone (too few in sync) or "
            "refusing (too few in sync, --require-sync)",
            labels=["mode"],
        )
        for name in ("replicated", "alone", "refusing"):
            mode.add_metric([name], 1 if replication.mode.value == name else 0)
        yield mode
        entries = GaugeMetricFamily(
            "fastworker_replication_lag_entries",
            "Journal frames a follower has not acknowledged",
            labels=["replica"],
        )
        seconds = GaugeMetricFamily(
            "fastworker_replication_lag_seconds",
            "Age of the oldest commit a follower has not acknowledged (0: it has them all)",
            labels=["replica"],
        )
        synced = GaugeMetricFamily(
            "fastworker_replication_follower_in_sync",
            "1 while a follower counts for acknowledgements",
            labels=["replica"],
        )
        for follower in replication.followers():
            entries.add_metric([follower.name], follower.lag.frames)
            seconds.add_metric([follower.name], follower.lag.seconds)
            synced.add_metric([follower.name], 1 if follower.in_sync else 0)
        yield entries
        yield seconds
        yield synced
