"""Replicated control planes under real network partitions: etcd, each replica and the
subworkers each run in a network namespace of their own (netns.py), the client in the
root namespace, and packets between two of them are dropped while a client submits
about 2,000 tasks/s.

The cases are the table "What a network partition does" of the high-availability guide:
here the leader cut from its follower, and from its clients and subworkers; the leader
cut from etcd, and alone on the minority side of three replicas, are steps of the chaos
run (``test_ha_chaos.py``), which checks the same things.
What every test holds to, once the partition has healed: each task the client saw
acknowledged ends ``success`` with its own result, and no two replicas ever led in the
same epoch (from each replica's ``leading`` log event). The longest time without an
acknowledgement is printed, never asserted: timings belong to bench/.
"""

from __future__ import annotations

import json
import signal
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from etcd_server import EtcdServer, runnable
from ha_cluster import Replica, Replicas
from ha_stream import Stream
from harness import Cluster, wait_until
from netns import Host, Network, netns_problem

from fastworker import Client

pytestmark = [
    pytest.mark.skipif(not runnable(), reason="etcd-server is not installed"),
    pytest.mark.skipif(netns_problem() is not None, reason=str(netns_problem())),
]

TIMEOUT = 30.0  # for any one reaction of the cluster; each test takes well under 40 s


@dataclass
class World:
    """The hosts of one test and what runs on them."""

    network: Network
    etcd_host: Host
    workers_host: Host
    hosts: dict[str, Host]  # replica name -> its host
    replicas: Replicas
    client: Client
    stream: Stream

    async def leader(self, other_than: str | None = None) -> Replica:
        return await self.replicas.leader(TIMEOUT, other_than=other_than)

    def others(self, leader: Replica) -> list[Replica]:
        return [r for r in self.replicas.replicas.values() if r is not leader]

    async def follows(self, replica: Replica) -> None:
        async def following() -> bool:
            return replica.readyz().get("role") == "follower"

        await wait_until(following, TIMEOUT, f"replica {replica.name} to follow")

    async def acknowledged(self, count: int) -> None:
        """Wait for ``count`` more acknowledgements than there are now."""
        await self.stream.count_at_least(len(self.stream.acked) + count, TIMEOUT)

    async def finish(self, case: str, cut_at: float) -> None:
        """Stop the stream, report it, and check what every case holds to."""
        await self.stream.stop()
        gap = self.stream.longest_gap(cut_at)
        leader = self.replicas.leading()
        acked, failed = len(self.stream.acked), len(self.stream.failed)
        print(
            f"{case}: longest gap {gap:.2f} s; {acked} acknowledged, {failed} calls failed; "
            f"leads at the end: {leader.name if leader else None}"
        )
        await self.stream.verify(self.client)
        print(f"{case}: {len(self.stream.acked)} acknowledged tasks all succeeded; lost 0")
        assert_one_leader_per_epoch(self.replicas)


def leaders_by_epoch(replicas: Replicas) -> dict[int, set[str]]:
    """Who logged ``leading`` in each epoch, from every replica's logs."""
    found: dict[int, set[str]] = defaultdict(set)
    for proc in replicas.cluster.procs:
        if not proc.name.startswith("replica-"):
            continue
        for line in proc.output().splitlines():
            if '"leading"' not in line:
                continue
            event = json.loads(line)
            if event.get("event") == "leading":
                found[int(event["epoch"])].add(str(event["replica"]))
    return dict(found)


def terms(replicas: Replicas) -> list[tuple[str, str, str]]:
    """Each replica's terms as (began, ended or "", replica), ISO UTC from its logs."""
    found: list[tuple[str, str, str]] = []
    for proc in replicas.cluster.procs:
        if not proc.name.startswith("replica-"):
            continue
        mine: list[tuple[str, str, str]] = []
        for line in proc.output().splitlines():
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("event") == "leading":
                mine.append((event["timestamp"], "", str(event["replica"])))
            elif event.get("event") == "stepped down" and mine and not mine[-1][1]:
                mine[-1] = (mine[-1][0], event["timestamp"], mine[-1][2])
        found += mine
    return sorted(found)


def assert_one_leader_per_epoch(replicas: Replicas) -> None:
    epochs = leaders_by_epoch(replicas)
    print(f"leaders by epoch: {epochs}; terms (began, stepped down, who): {terms(replicas)}")
    assert epochs, "no replica logged that it leads"
    assert all(len(names) == 1 for names in epochs.values()), epochs


@dataclass
class Lab:
    """Starts one test's world, and takes it all down afterwards, in order: heal, stop
    the stream, close the client, stop the processes, etcd, then the network."""

    tmp: Path
    request: pytest.FixtureRequest
    stack: AsyncExitStack

    async def start(self, names: tuple[str, ...] = ("a", "b"), *options: str) -> World:
        """etcd, replicas ``names`` (with control plane ``options``) and two subworkers
        each in a host of their own, started and in sync, and a stream of submissions
        running from the root namespace."""
        network = self.stack.enter_context(Network())
        etcd_host = network.host("etcd")
        hosts = {name: network.host(name) for name in names}
        workers_host = network.host("workers")
        etcd = EtcdServer(self.tmp, etcd_host.address, etcd_host.prefix)
        self.stack.enter_context(etcd)
        cluster = Cluster(self.tmp)
        self.stack.callback(stop_and_show, cluster, self.request)
        replicas = Replicas(cluster, etcd, names, places=hosts)
        replicas.start_all("--result-max-size", "100000", *options)  # results the test reads
        leader = await replicas.leader(TIMEOUT)
        await replicas.in_sync(leader, followers=len(names) - 1, timeout=TIMEOUT)
        replicas.subworker(place=workers_host)
        replicas.subworker(place=workers_host)
        client = await self.stack.enter_async_context(replicas.client())
        await wait_until(workers_registered(client, 2), TIMEOUT, "2 subworkers")
        stream = Stream(client)
        stream.start()
        self.stack.push_async_callback(stop_stream, stream)
        self.stack.callback(heal_all, network)
        await stream.count_at_least(2000, TIMEOUT)
        return World(network, etcd_host, workers_host, hosts, replicas, client, stream)


@pytest.fixture
async def lab(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Lab]:
    async with AsyncExitStack() as stack:
        yield Lab(tmp_path, request, stack)


def workers_registered(client: Client, count: int) -> Callable[[], Awaitable[bool]]:
    async def registered() -> bool:
        return len(await client.list_workers()) >= count

    return registered


def heal_all(network: Network) -> None:
    for host in list(network.hosts.values()):
        network.rejoin(host)


async def stop_stream(stream: Stream) -> None:
    if not stream._stop.is_set():
        await stream.stop()


def stop_and_show(cluster: Cluster, request: pytest.FixtureRequest) -> None:
    """Stop every process, and show the logs of a failed test."""
    for proc in cluster.procs:
        proc.signal(signal.SIGCONT)
    cluster.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for proc in cluster.procs:
            print(f"\n--- {proc.name} (pid {proc.pid}) ---\n{proc.output()[-4000:]}")


async def test_a_leader_cut_from_its_follower_goes_on_alone_and_stays_the_only_leader(
    lab: Lab,
) -> None:
    # Given a leader and its follower under load
    world = await lab.start()
    leader = await world.leader()
    (follower,) = world.others(leader)
    # When they can no longer reach each other (both still reach etcd)
    cut_at = time.monotonic()
    world.network.cut(world.hosts[leader.name], world.hosts[follower.name])

    async def alone() -> bool:
        return leader.readyz().get("replication") == "alone"

    # Then the leader goes on alone, and keeps acknowledging; the follower is not elected
    await wait_until(alone, TIMEOUT, "the leader to go on alone")
    await world.acknowledged(2000)
    assert world.replicas.leading() is leader
    assert follower.readyz().get("role") == "follower"
    # And once healed, the follower catches up
    world.network.heal(world.hosts[leader.name], world.hosts[follower.name])
    await world.replicas.in_sync(leader, timeout=TIMEOUT)
    await world.acknowledged(1000)
    await world.finish("leader cut from its follower", cut_at)


async def test_a_leader_cut_from_clients_and_subworkers_still_leads_and_loses_nothing(
    lab: Lab,
) -> None:
    # Given a leader and its follower under load, dropping silent subworkers after 3 s
    world = await lab.start(("a", "b"), "--heartbeat-timeout", "3")
    leader = await world.leader()
    (follower,) = world.others(leader)
    proc = leader.proc
    assert proc is not None
    here, away = world.hosts[leader.name], (world.network.root, world.workers_host)
    # When the leader can no longer reach the clients (root namespace) nor the subworkers,
    # while it still reaches etcd and its follower
    cut_at, before = time.monotonic(), len(world.stream.acked)
    for other in away:
        world.network.cut(here, other)

    async def workers_dropped() -> bool:
        removed = [
            line
            for line in proc.output().splitlines()
            if '"subworker removed"' in line and "missed heartbeats" in line
        ]
        return len(removed) >= 2

    # Then it keeps leading (no one else is elected) and drops the subworkers it cannot hear
    await wait_until(workers_dropped, TIMEOUT, "the leader to drop both subworkers")
    assert follower.readyz().get("role") == "follower"
    print(f"acknowledged while cut off: {len(world.stream.acked) - before}")
    # And once healed, the stream goes on through the same leader
    for other in away:
        world.network.heal(here, other)
    await world.acknowledged(2000)
    assert world.replicas.leading() is leader
    await world.finish("leader cut from clients and subworkers", cut_at)
