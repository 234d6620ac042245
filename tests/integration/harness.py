"""The integration harness: real control planes and subworkers on loopback, started as
users start them (``python -m fastworker.cli ...``), on free ports, always cleaned up."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastworker import Client

HERE = Path(__file__).parent
STOP_TIMEOUT = 15.0


_FIRST_PORT = 20_000  # above the well-known and most registered service ports
_ports = random.Random()  # its own: a test seeding the global one must not pin the ports


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux), else the IANA one."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 49_152


def free_port_block(size: int) -> int:
    """A port p such that p..p+size-1 are free on 127.0.0.1 right now.

    Picked below the kernel's ephemeral range: a port the kernel handed out would be free
    when checked, yet any process's next outgoing connection may take it before the server
    under test binds it (a control plane that then cannot bind never announces itself).
    """
    low = _ephemeral_low()
    for _ in range(200):
        start = _ports.randrange(_FIRST_PORT, low - size)
        held = []
        try:
            for port in range(start, start + size):
                s = socket.socket()
                held.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
            return start
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError("no block of free ports found")


def free_ports_apart(*sizes: int) -> list[int]:
    """The first ports of free blocks of these sizes, no two overlapping: none is bound
    until its server starts, so each block must also avoid the others."""
    taken: set[int] = set()
    starts = []
    for size in sizes:
        while not taken.isdisjoint(block := range(start := free_port_block(size), start + size)):
            pass
        taken.update(block)
        starts.append(start)
    return starts


async def wait_until(
    condition: Callable[[], Awaitable[bool]], timeout: float = 10.0, what: str = "condition"
) -> None:
    """Poll ``condition`` until true, failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)

    def wait(self, timeout: float = STOP_TIMEOUT) -> int:
        return self.popen.wait(timeout)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


@dataclass
class Cluster:
    """Starts processes for one test and stops every one of them afterwards."""

    tmp: Path
    base_port: int = field(default_factory=lambda: free_port_block(6))
    discovery_port: int = field(default_factory=lambda: free_port_block(1))
    procs: list[Proc] = field(default_factory=list)
    http_port: int = 0  # the HTTP port of the last control plane started

    def __post_init__(self) -> None:
        # Each pick is free on its own, so two picks can overlap: a discovery port inside
        # the base block is refused by the control plane ("collides with the range").
        while self.base_port <= self.discovery_port < self.base_port + 6:
            self.discovery_port = free_port_block(1)

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def discovery(self) -> str:
        return f"tcp://127.0.0.1:{self.discovery_port}"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FASTWORKER_")}
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
        env.update(extra)
        return env

    def spawn(self, name: str, *args: str, env: dict[str, str] | None = None) -> Proc:
        """Run ``fastworker ARGS``; a control plane gets a free HTTP port (``http_port``)
        unless ARGS choose one."""
        if args[:1] == ("control-plane",) and "--http-port" not in args:
            self.http_port = free_port_block(1)
            args = (*args, "--http-port", str(self.http_port))
        log = self.tmp / f"{name}-{len(self.procs)}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [sys.executable, "-m", "fastworker.cli", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env or self.env(),
                cwd=self.tmp,
            )
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def control_plane(
        self, *extra: str, local_concurrency: int = 4, env: dict[str, str] | None = None
    ) -> Proc:
        return self.spawn(
            "control-plane",
            "control-plane",
            "--task-modules",
            "it_tasks",
            "--base-port",
            str(self.base_port),
            "--discovery-port",
            str(self.discovery_port),
            "--local-concurrency",
            str(local_concurrency),
            "--shutdown-timeout",  # a short drain keeps teardown quick after long tasks
            "3",
            *extra,
            env=env,
        )

    def subworker(
        self, *extra: str, concurrency: int = 4, env: dict[str, str] | None = None
    ) -> Proc:
        return self.spawn(
            "subworker",
            "subworker",
            "--task-modules",
            "it_tasks",
            "--discovery-address",
            self.discovery,
            "--concurrency",
            str(concurrency),
            *extra,
            env=env,
        )

    def client(self, **options: Any) -> Client:
        options.setdefault("timeout", 20.0)
        options.setdefault("connect_timeout", 20.0)  # a control plane may still be starting
        return Client(self.discovery, **options)

    async def workers(self, client: Client, count: int, timeout: float = 10.0) -> None:
        """Wait until ``count`` subworkers (local one included) are registered."""

        async def enough() -> bool:
            return len(await client.list_workers()) >= count

        await wait_until(enough, timeout, f"{count} registered workers")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
