"""Replicated control planes for one test: etcd elects, each replica has its own ports
and state dir, and the harness says who leads (from each replica's ``/readyz``).

Each replica runs on loopback, or in a ``Place`` of its own (a host of netns.py): it binds
and advertises that place's address, and its command starts with the place's prefix."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from etcd_server import EtcdServer
from harness import Cluster, Proc, wait_until

from fastworker import Client
from fastworker.testing import free_ports_apart

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
LOOPBACK = "127.0.0.1"


class Place(Protocol):
    """Where a process runs: the address it has there, what its command starts with."""

    @property
    def address(self) -> str: ...

    @property
    def prefix(self) -> tuple[str, ...]: ...


@dataclass
class Replica:
    name: str
    base_port: int
    discovery_port: int
    http_port: int
    state_dir: Path
    proc: Proc | None = None
    host: str = LOOPBACK
    prefix: tuple[str, ...] = ()

    @property
    def discovery(self) -> str:
        return f"tcp://{self.host}:{self.discovery_port}"

    def readyz(self) -> dict[str, Any]:
        """``/readyz``'s JSON ({} if the replica does not answer)."""
        url = f"http://{self.host}:{self.http_port}/readyz"
        try:
            with _OPENER.open(url, timeout=2) as reply:
                return dict(json.load(reply))
        except urllib.error.HTTPError as exc:  # 503: not ready, still JSON
            return dict(json.load(exc))
        except (OSError, ValueError):
            return {}

    def metrics(self) -> str:
        with _OPENER.open(f"http://{self.host}:{self.http_port}/metrics", timeout=2) as reply:
            return str(reply.read().decode())


class Replicas:
    """Replicas ``names`` of one control plane, elected through ``etcd``, each in its place
    in ``places`` (loopback if it has none)."""

    def __init__(
        self,
        cluster: Cluster,
        etcd: EtcdServer,
        names: tuple[str, ...] = ("a", "b"),
        places: Mapping[str, Place] | None = None,
    ) -> None:
        self.cluster = cluster
        self.etcd = etcd
        self.replicas: dict[str, Replica] = {}
        self.options: tuple[str, ...] = ()
        # Every replica's ports apart from every other's (none is bound before it starts)
        ports = iter(free_ports_apart(*(7, 1, 1) * len(names)))
        for name in names:
            base, discovery, http = next(ports), next(ports), next(ports)
            state = cluster.tmp / f"state-{name}"
            self.replicas[name] = Replica(name, base, discovery, http, state)
            if places and name in places:
                self.replicas[name].host = places[name].address
                self.replicas[name].prefix = places[name].prefix

    @property
    def discovery(self) -> str:
        """Every replica's discovery address, comma-separated (what peers are given)."""
        return ",".join(r.discovery for r in self.replicas.values())

    def start(self, name: str, *extra: str, env: dict[str, str] | None = None) -> Replica:
        extra = extra or self.options
        self.options = extra  # a replica restarted later runs as it first did
        replica = self.replicas[name]
        replica.state_dir.mkdir(exist_ok=True)
        replica.proc = self.cluster.spawn(
            f"replica-{name}",
            "control-plane",
            "--task-modules",
            "it_tasks",
            "--leader-election",
            self.etcd.url("fastworker"),
            "--state-dir",
            str(replica.state_dir),
            "--replica-id",
            name,
            "--base-port",
            str(replica.base_port),
            "--discovery-port",
            str(replica.discovery_port),
            "--http-port",
            str(replica.http_port),
            "--local-concurrency",
            "0",
            "--shutdown-timeout",
            "3",
            *(("--host", replica.host) if replica.host != LOOPBACK else ()),
            *extra,
            env=env,
            prefix=replica.prefix,
        )
        return replica

    def start_all(self, *extra: str) -> None:
        for name in self.replicas:
            self.start(name, *extra)

    def subworker(self, concurrency: int = 4, place: Place | None = None) -> Proc:
        return self.cluster.spawn(
            "subworker",
            "subworker",
            "--task-modules",
            "it_tasks",
            "--discovery-address",
            self.discovery,
            "--concurrency",
            str(concurrency),
            prefix=place.prefix if place else (),
        )

    def client(self, **options: Any) -> Client:
        options.setdefault("timeout", 30.0)
        options.setdefault("connect_timeout", 20.0)
        return Client(self.discovery, **options)

    def leading(self) -> Replica | None:
        """The replica whose ``/readyz`` says it leads and is ready, if exactly one does."""
        found = [
            r
            for r in self.replicas.values()
            if (said := r.readyz()).get("role") == "leader" and said.get("status") == "ready"
        ]
        return found[0] if len(found) == 1 else None

    async def leader(self, timeout: float = 20.0, *, other_than: str | None = None) -> Replica:
        """Wait for a ready leader (not ``other_than``) and return it."""
        found: list[Replica] = []

        async def elected() -> bool:
            leader = self.leading()
            if leader is None or leader.name == other_than:
                return False
            found.append(leader)
            return True

        await wait_until(elected, timeout, "a ready leader")
        return found[-1]

    async def in_sync(self, leader: Replica, followers: int = 1, timeout: float = 20.0) -> None:
        """Wait until ``followers`` followers count for the leader's acknowledgements."""

        async def synced() -> bool:
            said = leader.readyz()
            return said.get("replication") == "replicated" and len(said["in_sync"]) >= followers

        await wait_until(synced, timeout, f"{followers} follower(s) in sync")
