"""The integration harness: real control planes and subworkers on loopback, started as
users start them (``python -m fastworker.cli ...``), on free ports, always cleaned up."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastworker import Client
from fastworker.testing import free_port_block, free_ports_apart

HERE = Path(__file__).parent
STOP_TIMEOUT = 15.0
PORT_ATTEMPTS = 3
PORT_TAKEN = "already in use"  # what a control plane that cannot bind a port says
STARTED = "control plane started"  # what it logs once every port is bound
_PORT_FLAGS = frozenset({"--base-port", "--discovery-port", "--http-port"})


async def wait_until(
    condition: Callable[[], Awaitable[bool]], timeout: float = 10.0, what: str = "condition"
) -> None:
    """Poll ``condition`` until true, failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


def lost_a_port_race(proc: Proc, timeout: float = 30.0) -> bool:
    """Wait until the control plane ``proc`` has bound every port (its log says it started)
    or exited; True if it exited because one of its ports was taken."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            return PORT_TAKEN in proc.output()
        if STARTED in proc.output():
            return False
        time.sleep(0.02)
    return False


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
        stop_all([self])


def stop_all(procs: list[Proc], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM to every one at once (each drains in parallel), SIGKILL to whoever is still
    running ``timeout`` seconds later."""
    for proc in procs:
        proc.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait()


@dataclass
class Cluster:
    """Starts processes for one test and stops every one of them afterwards."""

    tmp: Path
    base_port: int = 0
    discovery_port: int = 0
    procs: list[Proc] = field(default_factory=list)
    http_port: int = 0  # the HTTP port of the last control plane started
    spawned: int = 0  # processes started, including any given up on

    def __post_init__(self) -> None:
        if not self.base_port:
            self.base_port, self.discovery_port = free_ports_apart(6, 1)

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

    def spawn(
        self,
        name: str,
        *args: str,
        env: dict[str, str] | None = None,
        prefix: tuple[str, ...] = (),
    ) -> Proc:
        """Run ``fastworker ARGS`` (after ``prefix``, e.g. ``ip netns exec NS``, which must
        exec it); a control plane gets a free HTTP port (``http_port``) unless ARGS
        choose one."""
        if args[:1] == ("control-plane",) and "--http-port" not in args:
            ours = {*range(self.base_port, self.base_port + 6), self.discovery_port}
            self.http_port = free_port_block(1, avoid=ours)
            args = (*args, "--http-port", str(self.http_port))
        self.spawned += 1  # a log of its own, even for a start that was given up
        log = self.tmp / f"{name}-{self.spawned - 1}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [*prefix, sys.executable, "-m", "fastworker.cli", *args],
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
        """A control plane on this cluster's ports. The first process of a cluster that finds
        a port the harness picked taken (a server bound it after the pick) starts again on
        fresh ports; later ones keep theirs, since other processes were told them, and
        ports a test chose stay as the test chose them."""
        may_retry = not self.procs and not _PORT_FLAGS.intersection(extra)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            proc = self._control_plane(extra, local_concurrency, env)
            if not may_retry or attempt == PORT_ATTEMPTS or not lost_a_port_race(proc):
                return proc
            self.procs.remove(proc)
            self.base_port, self.discovery_port = free_ports_apart(6, 1)
        raise AssertionError("unreachable")

    def _control_plane(
        self, extra: tuple[str, ...], local_concurrency: int, env: dict[str, str] | None
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
            "--shutdown-timeout",  # as the control plane's: teardown waits for no long task
            "3",
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
        stop_all(self.procs[::-1])
