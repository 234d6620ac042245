"""The ``ha`` scenario's failover figures (issue 36): ``kill -9`` of the leader under load.

On ``cp-ha`` (etcd, two replicas) with two subworkers, one async client following the
leader through both replicas' discovery addresses submits ``mark`` tasks at ``RATE``/s,
paced, each with its own task id (so a call retried on the new leader is not queued
twice). Each repeat kills the leader with SIGKILL while the stream runs, and measures:

- ``failover_s``: from the kill to the first acknowledgement after it by the new leader
  (the end of the longest gap without one: replies the old leader had already sent
  still arrive in the first milliseconds after the kill);
- ``reruns``: tasks that ran more than once (the tasks append their number to a file);
- ``finished_reruns``: of those, the ones whose first run had finished before the kill.

The killed replica then starts again on its state directory (it follows), and the next
repeat waits until it is in sync. Every acknowledged task must end ``success``: a lost
one fails the scenario.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.cluster import READY_TIMEOUT, TASK_MODULES, ClusterError, started, wait_until
from bench.config import COMMON_FLAGS
from bench.ha_cluster import HaCluster, Replica
from bench.procs import Supervisor
from fastworker import Client, FastWorkerError

RATE = 1_000  # tasks/s the stream aims at
TICK = 0.01  # seconds between the stream's bursts
WARMUP = 1.5  # seconds of stream before each kill
AFTER = 2.0  # seconds of stream after the new leader's first acknowledgement
FAILOVER_UNITS = {"failover_s": "s", "reruns": "tasks", "finished_reruns": "tasks"}
SUBWORKERS = 2


@dataclass
class FailoverCluster(HaCluster):
    """``cp-ha`` whose subworkers and clients know every replica (so they follow), with
    the control plane's defaults (the other scenarios keep 200,000 results: replaying
    them would be part of every failover)."""

    flags: tuple[str, ...] = ("--http-port", "0", *COMMON_FLAGS)

    @property
    def discovery(self) -> str:
        return ",".join(f"tcp://127.0.0.1:{r.discovery_port}" for r in self.replicas)

    def kill_leader(self) -> Replica:
        leader = self.leader
        if leader is None:
            raise ClusterError("no leader to kill")
        leader.proc.popen.send_signal(signal.SIGKILL)
        leader.proc.popen.wait()
        self.leader = None
        return leader

    def restart(self, replica: Replica) -> None:
        """``replica`` again, on its state directory: it follows whoever leads."""
        again = self.respawn_replica(replica.name)
        self.replicas[self.replicas.index(replica)] = again

    async def new_leader(self) -> None:
        """Wait for the replicas to agree on a leader with its follower in sync."""
        self.leader, self.epoch = None, 0
        await self.settle()


@dataclass
class Stream:
    client: Client
    marks: Path
    acked: dict[str, float] = field(default_factory=dict)
    sent: dict[str, float] = field(default_factory=dict)
    failed: list[BaseException] = field(default_factory=list)
    _numbers: itertools.count[int] = field(default_factory=itertools.count)

    async def run(self, until: asyncio.Event) -> None:
        calls: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()
        while not until.is_set():
            for _ in range(int(RATE * TICK)):
                call = loop.create_task(self._submit(next(self._numbers)))
                calls.add(call)
                call.add_done_callback(calls.discard)
            await asyncio.sleep(TICK)  # pacing the stream
        await asyncio.gather(*calls)

    async def _submit(self, number: int) -> None:
        task_id = f"failover-{number:08d}"
        self.sent[task_id] = time.monotonic()
        try:
            await self.client.apply_async("mark", (number, str(self.marks)), task_id=task_id)
        except FastWorkerError as exc:
            self.failed.append(exc)
        else:
            self.acked[task_id] = time.monotonic()

    async def drained(self) -> None:
        """Until every acknowledged task has run."""

        async def ran() -> bool:
            return len(runs_of(self.marks)) >= len(self.acked)

        await wait_until(ran, READY_TIMEOUT, "every acknowledged task to run")

    def failover(self, killed_at: float) -> float:
        """Seconds from ``killed_at`` to the end of the longest gap without an
        acknowledgement after it."""
        times = sorted(t for t in self.acked.values() if t >= killed_at)
        start = [killed_at, *times]
        gaps = [(b - a, b) for a, b in itertools.pairwise(start)]
        if not gaps:
            raise ClusterError("nothing was acknowledged after the kill")
        _, end = max(gaps)
        return end - killed_at

    async def first_ack_after(self, moment: float, timeout: float) -> None:
        async def acked() -> bool:
            return any(t > moment for t in self.acked.values())

        await wait_until(acked, timeout, "an acknowledgement by the new leader")


def runs_of(marks: Path) -> Counter[int]:
    """How many times each task number ran (one line per run: its number)."""
    try:
        lines = marks.read_text().split()
    except FileNotFoundError:
        return Counter()
    return Counter(int(line) for line in lines)


async def one_failover(cluster: FailoverCluster, stream: Stream) -> dict[str, float]:
    await cluster.settle()
    marks_before = runs_of(stream.marks)
    until = asyncio.Event()
    running = asyncio.create_task(stream.run(until))
    try:
        await asyncio.sleep(WARMUP)  # the stream runs meanwhile
        finished_before = set(runs_of(stream.marks))
        killed = cluster.kill_leader()
        killed_at = time.monotonic()
        await stream.first_ack_after(killed_at + 0.2, READY_TIMEOUT)
        await asyncio.sleep(AFTER)
    finally:
        until.set()
        await running
    failover = stream.failover(killed_at)
    cluster.restart(killed)
    await cluster.new_leader()
    ran = runs_of(stream.marks)
    twice = {n for n, count in ran.items() if count - marks_before.get(n, 0) > 1}
    return {
        "failover_s": failover,
        "reruns": float(len(twice)),
        "finished_reruns": float(len(twice & finished_before)),
    }


def verify(stream: Stream) -> None:
    """Every acknowledged task ran (its number is in the marks file: results are not
    kept long enough, with the defaults, to ask for each); a ``ClusterError`` otherwise."""
    if stream.failed:
        raise ClusterError(f"{len(stream.failed)} submissions failed: {stream.failed[:3]}")
    ran = runs_of(stream.marks)
    lost = [task_id for task_id in stream.acked if int(task_id.rsplit("-", 1)[1]) not in ran]
    if lost:
        raise ClusterError(f"{len(lost)} acknowledged tasks never ran: {sorted(lost)[:3]}")


@asynccontextmanager
async def failover_cluster(supervisor: Supervisor) -> AsyncIterator[tuple[FailoverCluster, Client]]:
    async def start(cluster: FailoverCluster, state: Path) -> None:
        await cluster.start(state, None)
        for _ in range(SUBWORKERS - 1):
            cluster.start_subworker(None, TASK_MODULES)

    def make() -> FailoverCluster:
        return FailoverCluster(supervisor)

    async with started(make, start, "fastworker-bench-failover-") as (cluster, client):
        await cluster.wait_workers(client, remote=SUBWORKERS, local=False)
        yield cluster, client


async def measure_failovers(supervisor: Supervisor, repeats: int) -> dict[str, list[float]]:
    """``repeats`` kills of the leader, each under the stream: their figures, per kill."""
    collected: dict[str, list[float]] = {key: [] for key in FAILOVER_UNITS}
    async with failover_cluster(supervisor) as (cluster, client):
        marks = supervisor.log_dir / f"failover-marks-{os.getpid()}.txt"
        stream = Stream(client, marks)
        for _ in range(repeats):
            for key, value in (await one_failover(cluster, stream)).items():
                collected[key].append(value)
        await stream.drained()
        verify(stream)
    return collected
