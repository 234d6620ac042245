"""Hosts on a private network for one test, made of Linux network namespaces, and real
partitions between them.

``Network()`` creates a bridge in the root namespace (where pytest and its clients run)
with an address of its own, on a /24 of 10.213.0.0/16 that no other network on this
machine uses, and ``host(name)`` a namespace joined to it by a veth pair. A process runs
in a host when its command starts with ``host.prefix`` (``ip netns exec NS``).

``cut(a, b)`` drops every packet between two hosts (or a host and ``network.root``) with
iptables DROP rules inside the namespaces: dropped, never refused, so connections hang as
on a real partition. ``heal(a, b)`` removes them. Leaving the ``with`` block kills every
process still in a host, then removes namespaces, veths, bridge and rules, whatever
happened; it must never touch a device or rule another network made (names carry a
random suffix, so parallel workers never collide).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import random
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import pytest

SUBNETS = ipaddress.IPv4Network("10.213.0.0/16")  # rare on real networks
LOCK = Path("/tmp/fastworker-netns.lock")  # choosing a free /24 is one step for all workers
KILL_TIMEOUT = 10.0


def netns_problem() -> str | None:
    """Why this machine cannot make namespaced hosts, or None if it can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    missing = [tool for tool in ("ip", "iptables") if shutil.which(tool) is None]
    if missing:
        return f"not installed: {', '.join(missing)}"
    return None


def _run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@dataclass(frozen=True)
class Host:
    """One machine of the network: ``namespace`` None is the root namespace."""

    name: str
    address: str
    namespace: str | None = None

    @property
    def prefix(self) -> tuple[str, ...]:
        """What a command starts with to run in this host."""
        return ("ip", "netns", "exec", self.namespace) if self.namespace else ()

    def iptables(self, *args: str) -> None:
        _run(*self.prefix, "iptables", "-w", *args)


@dataclass
class Network:
    suffix: str = field(default_factory=lambda: secrets.token_hex(3))
    hosts: dict[str, Host] = field(default_factory=dict)
    cuts: set[frozenset[Host]] = field(default_factory=set)
    _subnet: ipaddress.IPv4Network | None = None
    _forward_rule: tuple[str, ...] = ()

    @property
    def bridge(self) -> str:
        return f"fwb{self.suffix}"

    @property
    def root(self) -> Host:
        """The root namespace, as a host: the bridge's address."""
        assert self._subnet is not None, "use Network inside a with block"
        return Host("root", str(self._subnet[1]))

    def __enter__(self) -> Network:
        problem = netns_problem()
        if problem:
            pytest.skip(problem)
        try:
            self._make_bridge()
            self._accept_bridged_traffic()
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._remove()

    def host(self, name: str) -> Host:
        """A new namespace on the bridge, with ``lo`` up and an address of its own."""
        assert self._subnet is not None, "use Network inside a with block"
        index = len(self.hosts) + 1
        namespace = f"fw-{self.suffix}-{name}"
        address = str(self._subnet[10 + index])
        veth = self._veth(index)
        try:
            _run("ip", "netns", "add", namespace)
        except RuntimeError as exc:
            pytest.skip(f"cannot make a network namespace: {exc}")
        host = Host(name, address, namespace)
        self.hosts[name] = host  # registered first: removed on exit even if half made
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        _run("ip", "link", "set", veth, "master", self.bridge, "up")
        inside = ("ip", "-n", namespace)
        _run(*inside, "addr", "add", f"{address}/{self._subnet.prefixlen}", "dev", "eth0")
        _run(*inside, "link", "set", "eth0", "up")
        _run(*inside, "link", "set", "lo", "up")
        return host

    def cut(self, a: Host, b: Host) -> None:
        """Drop every packet between ``a`` and ``b``, both ways."""
        pair = frozenset((a, b))
        if a == b or pair in self.cuts:
            return
        for here, there in ((a, b), (b, a)):
            if here.namespace:
                here.iptables("-A", "INPUT", "-s", there.address, "-j", "DROP")
                here.iptables("-A", "OUTPUT", "-d", there.address, "-j", "DROP")
        self.cuts.add(pair)

    def heal(self, a: Host, b: Host) -> None:
        pair = frozenset((a, b))
        if pair not in self.cuts:
            return
        for here, there in ((a, b), (b, a)):
            if here.namespace:
                here.iptables("-D", "INPUT", "-s", there.address, "-j", "DROP")
                here.iptables("-D", "OUTPUT", "-d", there.address, "-j", "DROP")
        self.cuts.discard(pair)

    def isolate(self, host: Host) -> None:
        """Cut ``host`` from every other host and from the root namespace."""
        for other in self._everyone():
            self.cut(host, other)

    def rejoin(self, host: Host) -> None:
        """Heal every cut ``host`` is part of."""
        for other in self._everyone():
            self.heal(host, other)

    def _veth(self, index: int) -> str:
        """The root namespace's end of host ``index``'s veth pair."""
        return f"fw{self.suffix}v{index}"

    def _everyone(self) -> list[Host]:
        return [self.root, *self.hosts.values()]

    def _make_bridge(self) -> None:
        LOCK.touch(exist_ok=True)
        with LOCK.open() as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            taken = _used_subnets()
            free = [s for s in SUBNETS.subnets(new_prefix=24) if not any(map(s.overlaps, taken))]
            if not free:
                raise RuntimeError(f"no free /24 left in {SUBNETS}")
            subnet = random.choice(free)
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            self._subnet = subnet  # from here on, _remove() deletes the bridge
            _run("ip", "addr", "add", f"{subnet[1]}/{subnet.prefixlen}", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")

    def _accept_bridged_traffic(self) -> None:
        # With br_netfilter loaded, traffic between two ports of the bridge crosses the
        # root namespace's FORWARD chain, whose policy is DROP where Docker runs.
        rule = ("FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT")
        if subprocess.run(["iptables", "-w", "-S", "FORWARD"], capture_output=True).returncode:
            return  # no FORWARD chain: nothing drops bridged traffic
        _run("iptables", "-w", "-I", *rule)
        self._forward_rule = rule

    def _remove(self) -> None:
        """Everything this network made, each step attempted whatever the others did."""
        for index, host in enumerate(self.hosts.values(), start=1):
            assert host.namespace is not None
            with contextlib.suppress(RuntimeError):
                _kill_everyone_in(host.namespace)
            # Deleted here, not left to the namespace: a socket still closing (an orphan
            # retransmitting to a peer that is gone) keeps a deleted namespace alive.
            with contextlib.suppress(RuntimeError):
                _run("ip", "link", "delete", self._veth(index))
            with contextlib.suppress(RuntimeError):
                _run("ip", "netns", "delete", host.namespace)
        self.hosts.clear()
        self.cuts.clear()
        if self._forward_rule:
            with contextlib.suppress(RuntimeError):
                _run("iptables", "-w", "-D", *self._forward_rule)
            self._forward_rule = ()
        if self._subnet is not None:
            with contextlib.suppress(RuntimeError):
                _run("ip", "link", "delete", self.bridge)
            self._subnet = None


def _used_subnets() -> set[ipaddress.IPv4Network]:
    """The networks in 10.213.0.0/16 that an address or route on this machine uses."""
    words = (_run("ip", "-4", "-o", "addr", "show") + _run("ip", "-4", "route")).split()
    used = set()
    for word in words:
        with contextlib.suppress(ValueError):
            network = ipaddress.ip_network(word, strict=False)
            if isinstance(network, ipaddress.IPv4Network) and network.overlaps(SUBNETS):
                used.add(network)
    return used


def _pids_in(namespace: str) -> set[int]:
    return {int(pid) for pid in _run("ip", "netns", "pids", namespace).split()}


def _kill_everyone_in(namespace: str) -> None:
    """SIGKILL every process in ``namespace`` and wait until none is left."""
    deadline = time.monotonic() + KILL_TIMEOUT
    while pids := _pids_in(namespace):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {sorted(pids)} outlived SIGKILL in {namespace}")
        time.sleep(0.02)  # polling a condition with a deadline
