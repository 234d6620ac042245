"""The ``cp-ha`` topology (issue 20): etcd, two replicated control planes and one subworker.

It is ``cp+1sw+journal`` made replicated, so the two compare like for like: each replica
runs with ``--local-concurrency 0`` and its own ``--state-dir`` (a fresh temporary
directory), and ``--leader-election`` on a single-member etcd of its own (Debian's
``/usr/bin/etcd``, data in the same temporary directory). The leader acknowledges a write
once its own fsync and its follower's (``--sync-replicas 1``, the default) cover it.
Every port sits in one block of free loopback ports, so the replicas never collide.

Replicas serve HTTP (``--http-port``, off in the other topologies): ``/readyz`` is how the
benchmark finds the leader and whether its follower is in sync. The subworker and the
client dial the leader's discovery port (a follower's would lead them there too).

Before each repeat ``settle`` waits until the follower is in sync. The leader may still
drop to acknowledging alone during a repeat (a follower further behind than the lag bound,
2 s, is out of sync: with ``--require-sync`` off, the default, the leader goes on alone),
so ``check_measured`` reports, as ``unreplicated_s``, how long it did, from the leader's
own log: replicas log at info level for that (nothing is logged per task at info; the
other topologies log at warning). A repeat in which the leader changed fails. This module
must never signal a process the supervisor did not start.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import shutil
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cluster import (
    READY_TIMEOUT,
    TASK_MODULES,
    Cluster,
    ClusterError,
    started,
    wait_until,
)
from bench.config import CONTROL_PLANE_FLAGS
from bench.procs import Proc, Supervisor
from fastworker import Client
from fastworker.testing import free_port_block

ETCD = Path("/usr/bin/etcd")
REPLICAS = 2
ELECTION_PREFIX = "fastworker-bench"
# Per replica: base..base+5 (the control plane), base+6 (replication), then discovery
# and HTTP; after the replicas, etcd's client and peer ports.
REPLICA_PORTS = 9
_REPLICATION, _DISCOVERY, _HTTP = 6, 7, 8
# What the leader logs when it starts acknowledging without its follower (or refusing,
# with --require-sync), and when it acknowledges replicated writes again.
ALONE = ("replication: too few followers in sync; acknowledging on this disk alone",)
REFUSING = ("replication: too few followers in sync; refusing writes (--require-sync)",)
REPLICATED = "replication: acknowledging replicated writes"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def etcd_binary() -> Path | None:
    found = shutil.which("etcd")
    if found is not None:
        return Path(found)
    return ETCD if ETCD.exists() else None


@dataclass
class Replica:
    name: str
    proc: Proc
    discovery_port: int
    http_port: int

    def readyz(self) -> dict[str, Any]:
        """``/readyz``'s JSON (a follower answers 503 with it); empty if unreachable."""
        url = f"http://127.0.0.1:{self.http_port}/readyz"
        try:
            with _NO_PROXY.open(url, timeout=2) as response:
                body = response.read()
        except urllib.error.HTTPError as error:
            body = error.read()
        except OSError:
            return {}
        try:
            found = json.loads(body)
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    def log_size(self) -> int:
        try:
            return self.proc.log.stat().st_size
        except OSError:
            return 0

    def log_since(self, offset: int) -> list[str]:
        """Its log's lines from byte ``offset`` on."""
        try:
            with self.proc.log.open("rb") as log:
                log.seek(offset)
                return log.read().decode(errors="replace").splitlines()
        except OSError:
            return []


def unreplicated_seconds(lines: Iterable[str], now: dt.datetime) -> float:
    """Seconds a leader's log ``lines`` (structlog JSON, replicated at first) spent
    acknowledging alone or refusing writes, up to ``now`` if it had not recovered."""
    total, since = 0.0, None
    for line in lines:
        try:
            entry = json.loads(line)
            event, at = entry["event"], dt.datetime.fromisoformat(entry["timestamp"])
        except (ValueError, KeyError, TypeError):
            continue
        if event in ALONE + REFUSING and since is None:
            since = at
        elif event == REPLICATED and since is not None:
            total += (at - since).total_seconds()
            since = None
    if since is not None:
        total += max(0.0, (now - since).total_seconds())
    return total


@dataclass
class HaCluster(Cluster):
    etcd: Proc | None = None
    replicas: list[Replica] = field(default_factory=list)
    leader: Replica | None = None
    epoch: int = 0
    _log_mark: int = 0
    _spawned: dict[str, tuple[int, Path, str]] = field(default_factory=dict)
    flags: tuple[str, ...] = tuple(CONTROL_PLANE_FLAGS)  # each replica's, before its own

    @property
    def procs(self) -> list[Proc]:
        head = [self.etcd] if self.etcd is not None else []
        return head + [r.proc for r in self.replicas] + self.subworkers

    async def start(self, state: Path, worker_concurrency: int | None) -> None:
        """etcd, the replicas, a leader with its follower in sync, then the subworker."""
        etcd = etcd_binary()
        if etcd is None:
            raise ClusterError(f"{ETCD} not found: install Debian's etcd-server")
        ports = free_port_block(REPLICA_PORTS * REPLICAS + 2)
        client_port = ports + REPLICA_PORTS * REPLICAS
        await self._start_etcd(etcd, state / "etcd", client_port, client_port + 1)
        election = f"etcd://127.0.0.1:{client_port}/{ELECTION_PREFIX}"
        for i in range(REPLICAS):
            base = ports + REPLICA_PORTS * i
            self._start_replica(f"r{i + 1}", base, state / f"r{i + 1}", election)
        await self._wait_replicated(READY_TIMEOUT)
        self.start_subworker(worker_concurrency, TASK_MODULES)

    async def _start_etcd(self, binary: Path, data: Path, client: int, peer: int) -> None:
        client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        self.etcd = self.supervisor.spawn(
            "etcd",
            [
                str(binary),
                "--name=bench",
                f"--data-dir={data}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=bench={peer_url}",
                "--log-level=warn",
            ],
        )

        async def healthy() -> bool:
            self.check_alive()
            return await asyncio.to_thread(_etcd_healthy, client_url)

        await wait_until(healthy, READY_TIMEOUT, "etcd to be healthy")

    def _start_replica(self, name: str, base: int, state_dir: Path, election: str) -> None:
        self._spawned[name] = (base, state_dir, election)
        self.replicas.append(self.respawn_replica(name))

    def respawn_replica(self, name: str) -> Replica:
        """Replica ``name`` started (again) as it first was, on its state directory."""
        base, state_dir, election = self._spawned[name]
        state_dir.mkdir(exist_ok=True)
        proc = self.supervisor.python_module(
            f"control-plane-{name}",
            "fastworker.cli",
            "control-plane",
            "--task-modules",
            *TASK_MODULES,
            *("--base-port", str(base)),
            *("--replication-port", str(base + _REPLICATION)),
            *("--discovery-port", str(base + _DISCOVERY)),
            *self.flags,
            *("--http-port", str(base + _HTTP)),  # after the flags' 0: the last wins
            *("--local-concurrency", "0"),
            *("--state-dir", str(state_dir)),
            *("--leader-election", election),
            *("--replica-id", name),
            *("--log-level", "info"),  # after the flags': when it went alone
        )
        return Replica(name, proc, base + _DISCOVERY, base + _HTTP)

    async def _replicated_leader(self) -> tuple[Replica, dict[str, Any]] | None:
        """The leader and its ``/readyz``, if one leads with a follower in sync."""
        said = await asyncio.gather(*(asyncio.to_thread(r.readyz) for r in self.replicas))
        for replica, ready in zip(self.replicas, said, strict=True):
            if ready.get("role") == "leader":
                in_sync = ready.get("replication") == "replicated" and ready.get("in_sync")
                return (replica, ready) if in_sync else None
        return None

    async def _wait_replicated(self, timeout: float) -> None:
        async def replicated() -> bool:
            self.check_alive()
            found = await self._replicated_leader()
            if found is None:
                return False
            leader, ready = found
            epoch = int(ready.get("epoch", 0))
            if self.leader is not None and (leader is not self.leader or epoch != self.epoch):
                raise ClusterError(f"the leader changed: now {leader.name} ({ready})")
            self.leader, self.epoch = leader, epoch
            self.control_plane, self.discovery_port = leader.proc, leader.discovery_port
            return True

        await wait_until(replicated, timeout, "a leader with its follower in sync")

    async def settle(self) -> None:
        await self._wait_replicated(READY_TIMEOUT)
        assert self.leader is not None
        self._log_mark = self.leader.log_size()

    async def check_measured(self) -> dict[str, float]:
        """``unreplicated_s`` of the repeat just measured; fails if the leader changed."""
        leader, epoch = self.leader, self.epoch
        if leader is None:
            raise ClusterError("no leader was found before measuring")
        self.check_alive()
        now = dt.datetime.now(dt.UTC)
        alone = unreplicated_seconds(leader.log_since(self._log_mark), now)
        ready = await asyncio.to_thread(leader.readyz)
        if ready.get("role") != "leader" or ready.get("epoch") != epoch:
            raise ClusterError(f"{leader.name} no longer leads epoch {epoch}: {ready}")
        return {"unreplicated_s": alone}

    def stop(self) -> None:
        """The subworker, the follower, the leader (it goes on alone meanwhile), etcd."""
        self.supervisor.stop(self.subworkers)
        followers = [r.proc for r in self.replicas if r is not self.leader]
        self.supervisor.stop(followers)
        self.supervisor.stop([r.proc for r in self.replicas if r is self.leader])
        if self.etcd is not None:
            self.supervisor.stop([self.etcd])
        self.subworkers, self.replicas, self.control_plane = [], [], None
        self.leader, self.etcd = None, None


def _etcd_healthy(client_url: str) -> bool:
    try:
        with _NO_PROXY.open(f"{client_url}/health", timeout=1) as response:
            return b'"true"' in response.read()
    except OSError:
        return False


@asynccontextmanager
async def running_ha_cluster(
    supervisor: Supervisor, worker_concurrency: int | None = None
) -> AsyncIterator[tuple[Cluster, Client]]:
    """A ready ``cp-ha`` cluster and a client connected to its leader; stopped on exit
    (etcd included), and its temporary directory removed."""

    async def start(cluster: HaCluster, state: Path) -> None:
        await cluster.start(state, worker_concurrency)

    async with started(lambda: HaCluster(supervisor), start, "fastworker-bench-ha-") as (
        cluster,
        client,
    ):
        await cluster.wait_workers(client, remote=1, local=False)
        yield cluster, client
