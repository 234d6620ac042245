"""Replicated control planes through a fixed sequence of faults, on real etcd and real
network partitions: three replicas each in a network namespace of their own (netns.py),
etcd in another, two subworkers in a fifth, the client in the root namespace, while it
submits about 2,000 tasks/s of a task whose side effect is a line in a shared file.

The faults, one after another, each followed by a ready leader and acknowledgements
again: kill -9 of the leader (restarted: it follows); SIGSTOP of the leader past its
lease (SIGCONT: it steps down and follows); the leader cut from etcd; the leader alone on
the minority side; kill -9 of a subworker (another one started).

What the test holds to at the end: each task the client saw acknowledged ends
``success`` with its own result, its side effect happened at least once, and no two
replicas ever led in the same epoch. How many tasks ran more than once, and the longest
time without an acknowledgement after each fault, are printed, never asserted: timings
belong to bench/.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import json
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from etcd_server import EtcdServer, runnable
from ha_cluster import Replica, Replicas
from ha_stream import Stream
from harness import Cluster, Proc, wait_until
from netns import Network, netns_problem
from test_ha_partitions import (
    TIMEOUT,
    World,
    assert_one_leader_per_epoch,
    heal_all,
    stop_and_show,
    stop_stream,
    workers_registered,
)

from fastworker import FastWorkerError

pytestmark = [
    pytest.mark.skipif(not runnable(), reason="etcd-server is not installed"),
    pytest.mark.skipif(netns_problem() is not None, reason=str(netns_problem())),
]

NAMES = ("a", "b", "c")
AFTER_EACH_FAULT = 2000  # acknowledgements that show the stream flows again


@dataclass(kw_only=True)
class Witnessed(Stream):
    """The HA stream, submitting ``witness(runs, i)``: each run appends its task id to
    ``runs``, and returns ``i + 1`` (what ``verify`` checks)."""

    runs: Path

    async def _submit(self, number: int) -> None:
        task_id = f"task-{number:07d}"
        try:
            await self.client.apply_async("witness", (str(self.runs), number), task_id=task_id)
        except FastWorkerError as exc:
            self.failed.append(exc)
        else:
            self.acked[task_id] = (number, time.monotonic())


@dataclass(frozen=True)
class Fault:
    name: str
    began: float
    ended: float
    offset: int  # of the file of runs when it began


@dataclass
class Chaos:
    """The world of the test, the subworkers it started, and each fault: when it began
    and ended (the cluster leading and acknowledging again, the faulty replica back), and
    how long the file of runs was when it began."""

    world: World
    subworkers: list[Proc]
    runs: Path
    faults: list[Fault] = field(default_factory=list)

    @property
    def replicas(self) -> Replicas:
        return self.world.replicas

    async def recovered_from(self, old: Replica) -> Replica:
        """Wait for a ready leader other than ``old``, and acknowledgements through it."""
        new = await self.world.leader(other_than=old.name)
        await self.world.acknowledged(AFTER_EACH_FAULT)
        return new

    async def rejoined(self, old: Replica, new: Replica) -> None:
        """Wait for ``old`` to follow ``new``, and both followers to be in sync."""
        await self.world.follows(old)
        await self.replicas.in_sync(new, followers=len(NAMES) - 1, timeout=TIMEOUT)

    async def fault(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        offset = self.runs.stat().st_size if self.runs.exists() else 0
        began = time.monotonic()
        await run()
        self.faults.append(Fault(name, began, time.monotonic(), offset))
        print(f"{name}: recovered in {self.faults[-1].ended - began:.2f} s")


def reruns_by_fault(runs: Path, faults: list[Fault]) -> dict[str, int]:
    """How many runs repeated an earlier one, by the fault (the latest one begun) during
    which they were written."""
    found: dict[str, int] = collections.Counter()
    seen: set[bytes] = set()
    offset = 0
    for line in runs.read_bytes().splitlines(keepends=True):
        if line in seen:
            during = [f.name for f in faults if f.offset <= offset]
            found[during[-1] if during else "before the faults"] += 1
        seen.add(line)
        offset += len(line)
    return dict(found)


TAKEOVER = {  # what each replica logs as it takes over, and what of it to print
    "leading": ("replica", "epoch"),
    "journal replayed": ("live", "held_by_subworkers"),
    "tasks held in doubt since the takeover, redelivered": ("count",),
}


def takeovers(replicas: Replicas) -> list[str]:
    """Each takeover as the replicas logged it, in time order: who led from which epoch,
    how many tasks were live and how many of those in doubt, how many were redelivered."""
    found: list[str] = []
    for proc in replicas.cluster.procs:
        if proc.name.startswith("replica-"):
            for line in proc.output().splitlines():
                event = json.loads(line) if line.startswith("{") else {}
                if (keys := TAKEOVER.get(event.get("event", ""))) is not None:
                    said = " ".join(f"{key}={event.get(key)}" for key in keys)
                    found.append(f"{event['timestamp'][11:23]} {event['event']}: {said}")
    return sorted(found)


def longest_gap(acked: list[float], began: float, ended: float) -> float:
    """The longest time without an acknowledgement from the last one before ``began``
    to the last one before ``ended`` (``acked`` sorted)."""
    first = max(0, bisect.bisect_left(acked, began) - 1)
    window = acked[first : bisect.bisect_right(acked, ended)]
    return max((b - a for a, b in itertools.pairwise(window)), default=0.0)


@pytest.fixture
async def chaos(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Chaos]:
    """etcd, three replicas (each keeping every result the test reads back) and two
    subworkers, each in a host of their own, in sync, and the stream running. Taken down
    in order whatever happens: heal, stop the stream, close the client, stop every
    process (paused ones woken first), etcd, then the network."""
    async with AsyncExitStack() as stack:
        network = stack.enter_context(Network())
        etcd_host = network.host("etcd")
        hosts = {name: network.host(name) for name in NAMES}
        workers_host = network.host("workers")
        etcd = stack.enter_context(EtcdServer(tmp_path, etcd_host.address, etcd_host.prefix))
        cluster = Cluster(tmp_path)
        stack.callback(stop_and_show, cluster, request)
        replicas = Replicas(cluster, etcd, NAMES, places=hosts)
        replicas.start_all("--result-max-size", "1000000")
        leader = await replicas.leader(TIMEOUT)
        await replicas.in_sync(leader, followers=len(NAMES) - 1, timeout=TIMEOUT)
        subworkers = [replicas.subworker(place=workers_host) for _ in range(2)]
        client = await stack.enter_async_context(replicas.client())
        await wait_until(workers_registered(client, 2), TIMEOUT, "2 subworkers")
        stream = Witnessed(client, runs=tmp_path / "runs")
        stream.start()
        stack.push_async_callback(stop_stream, stream)
        stack.callback(heal_all, network)
        await stream.count_at_least(AFTER_EACH_FAULT, TIMEOUT)
        world = World(network, etcd_host, workers_host, hosts, replicas, client, stream)
        yield Chaos(world, subworkers, stream.runs)


async def test_a_cluster_through_five_faults_loses_no_acknowledged_task_nor_its_effect(
    chaos: Chaos,
) -> None:
    world, replicas, network = chaos.world, chaos.replicas, chaos.world.network
    started = time.monotonic()

    # When the leader is killed (kill -9), and started again
    async def killed() -> None:
        old = await world.leader()
        assert old.proc is not None
        old.proc.signal(signal.SIGKILL)
        new = await chaos.recovered_from(old)
        replicas.start(old.name)
        await chaos.rejoined(old, new)

    # When the leader is paused past its lease, and woken
    async def paused() -> None:
        old = await world.leader()
        assert old.proc is not None
        old.proc.signal(signal.SIGSTOP)
        new = await chaos.recovered_from(old)
        old.proc.signal(signal.SIGCONT)
        await chaos.rejoined(old, new)

    # When the leader is cut from etcd, and healed
    async def cut_from_etcd() -> None:
        old = await world.leader()
        network.cut(world.hosts[old.name], world.etcd_host)
        new = await chaos.recovered_from(old)
        network.heal(world.hosts[old.name], world.etcd_host)
        await chaos.rejoined(old, new)

    # When the leader is alone on the minority side, and healed
    async def alone() -> None:
        old = await world.leader()
        network.isolate(world.hosts[old.name])
        new = await chaos.recovered_from(old)
        network.rejoin(world.hosts[old.name])
        await chaos.rejoined(old, new)

    # When a subworker is killed (kill -9), and another one started
    async def subworker_killed() -> None:
        before = {w.worker_id for w in await world.client.list_workers()}
        chaos.subworkers[0].signal(signal.SIGKILL)
        chaos.subworkers.append(replicas.subworker(place=world.workers_host))

        async def replaced() -> bool:
            workers = await world.client.list_workers()
            return any(w.worker_id not in before and w.completed for w in workers)

        await wait_until(replaced, TIMEOUT, "the new subworker to run tasks")
        await world.acknowledged(AFTER_EACH_FAULT)

    await chaos.fault("leader killed", killed)
    await chaos.fault("leader paused", paused)
    await chaos.fault("leader cut from etcd", cut_from_etcd)
    await chaos.fault("leader alone on the minority side", alone)
    await chaos.fault("subworker killed", subworker_killed)
    await world.stream.stop()
    stream = world.stream
    assert isinstance(stream, Witnessed)
    print(
        f"faults over in {time.monotonic() - started:.1f} s: {len(stream.acked)} acknowledged, "
        f"{len(stream.failed)} calls failed"
    )
    times = sorted(t for _, t in stream.acked.values())
    for fault in chaos.faults:
        gap = longest_gap(times, fault.began, fault.ended)
        print(f"{fault.name}: longest gap {gap:.2f} s")

    # Then every acknowledged task ended success with its own result (from the leader)
    await stream.verify(world.client)
    # And its side effect happened, at least once
    runs = collections.Counter(stream.runs.read_text().split())
    missing = sorted(set(stream.acked) - runs.keys())
    assert not missing, f"{len(missing)} acknowledged tasks never ran: {missing[:10]}"
    reruns = sum(1 for count in runs.values() if count > 1)
    print(f"{len(stream.acked)} acknowledged tasks all succeeded; {reruns} ran more than once")
    print(f"runs again, by fault: {reruns_by_fault(stream.runs, chaos.faults)}")
    print("takeovers:", *takeovers(replicas), sep="\n  ")
    # And no two replicas ever led in the same epoch
    assert_one_leader_per_epoch(replicas)
    print(f"wall time {time.monotonic() - started:.1f} s")
