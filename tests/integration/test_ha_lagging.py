"""A follower that fell behind, elected on purpose: with three replicas and
``--sync-replicas 2 --require-sync`` (every acknowledged write on all three disks), the
follower that lagged and caught up leads with every acknowledged task, even when it is
the only replica left to elect. Real etcd, real processes, a stream of about 2,000
tasks/s throughout."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from etcd_server import EtcdServer, runnable
from ha_cluster import Replica, Replicas
from ha_stream import Stream
from harness import Cluster, wait_until

pytestmark = pytest.mark.skipif(not runnable(), reason="etcd-server is not installed")

TIMEOUT = 30.0


@pytest.fixture
def three(tmp_path: Path) -> Iterator[Replicas]:
    cluster = Cluster(tmp_path)
    try:
        with EtcdServer(tmp_path) as etcd:
            yield Replicas(cluster, etcd, ("a", "b", "c"))
    finally:
        for proc in cluster.procs:
            proc.signal(signal.SIGCONT)  # a paused process cannot stop
        cluster.stop()


def said(replica: Replica, key: str) -> object:
    return replica.readyz().get(key)


async def test_a_follower_that_lagged_leads_with_every_acknowledged_task(
    three: Replicas,
) -> None:
    # Given three replicas that acknowledge a write once it is on all three disks
    three.start_all("--sync-replicas", "2", "--require-sync", "--result-max-size", "200000")
    leader = await three.leader()
    await three.in_sync(leader, followers=2)
    three.subworker()
    three.subworker()
    async with three.client(timeout=60.0) as client:
        stream = Stream(client)
        stream.start()
        await stream.count_at_least(2000, TIMEOUT)
        lagger, other = (r for r in three.replicas.values() if r is not leader)
        assert lagger.proc is not None
        assert other.proc is not None
        assert leader.proc is not None

        # When one follower falls behind (paused past the lag bound: writes are refused
        # meanwhile), then catches up
        lagger.proc.signal(signal.SIGSTOP)

        async def refusing() -> bool:
            return said(leader, "replication") == "refusing"

        await wait_until(refusing, TIMEOUT, "the leader to refuse writes")
        lagger.proc.signal(signal.SIGCONT)
        await three.in_sync(leader, followers=2, timeout=TIMEOUT)
        before = len(stream.acked)
        await stream.count_at_least(before + 2000, TIMEOUT)

        # And it is made the only replica to elect: the leader killed, the other paused
        other.proc.signal(signal.SIGSTOP)
        leader.proc.signal(signal.SIGKILL)
        killed_at = time.monotonic()
        assert await three.leader(TIMEOUT, other_than=leader.name) is lagger

        # Then once the others are back (it needs two followers to acknowledge), the
        # stream goes on, and every task acknowledged before and after is there
        other.proc.signal(signal.SIGCONT)
        three.start(leader.name)
        await three.in_sync(lagger, followers=2, timeout=TIMEOUT)
        await stream.count_at_least(len(stream.acked) + 2000, TIMEOUT)
        await stream.stop()
        print(
            f"{len(stream.acked)} acknowledged, {len(stream.failed)} calls refused; the "
            f"longest gap after the kill: {stream.longest_gap(killed_at):.2f} s"
        )
        await stream.verify(client)
