"""A FastWorker cluster for one scenario: a control plane and 0..2 subworkers, started with
the public CLI (``python -m fastworker.cli``) on free ports, and a connected ``Client``.

Topologies: ``cp`` is a control plane alone that runs tasks itself; ``cp+1sw`` and
``cp+2sw`` are a control plane with ``--local-concurrency 0`` plus subworkers;
``cp+1sw+journal`` is ``cp+1sw`` made durable (``--state-dir`` in a fresh temporary
directory, so every acknowledgement waits for its fsync). The ``cpu_bound`` topologies
(``CPU_WORKERS``: ``cp+1sw+1proc``, ...) are ``cp+1sw`` loading that scenario's tasks
too, with the subworker's ``--processes`` and ``--concurrency`` their own. ``cp-ha`` (a
replicated ``cp+1sw+journal``) is in ``bench/ha_cluster.py``. The cluster is ready when
``list_workers`` shows the workers that will run tasks.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from bench.config import CONTROL_PLANE_FLAGS, CPU_WORKERS, SUBWORKER_FLAGS
from bench.procs import Proc, Supervisor, rss_mib
from fastworker import Client
from fastworker.testing import free_ports_apart

TASK_MODULES: tuple[str, ...] = ("bench_tasks",)
CPU_TASK_MODULES = ("bench_cpu_tasks",)
SUBWORKERS = {"cp": 0, "cp+1sw": 1, "cp+2sw": 2, "cp+1sw+journal": 1}
SUBWORKERS.update(dict.fromkeys(CPU_WORKERS, 1))
JOURNALED = {"cp+1sw+journal"}
READY_TIMEOUT = 30.0
CLIENT_TIMEOUT = 30.0
_POLL = 0.02
PORT_ATTEMPTS = 3
PORT_TAKEN = "already in use"  # what a process that cannot bind a port says


class ClusterError(RuntimeError):
    """A process of the cluster died, or the cluster never became ready."""


async def wait_until(condition: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds; raise ``ClusterError`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(_POLL)


@dataclass
class Cluster:
    supervisor: Supervisor
    base_port: int = 0
    discovery_port: int = 0
    control_plane: Proc | None = None
    subworkers: list[Proc] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.base_port:
            self.base_port, self.discovery_port = free_ports_apart(6, 1)

    @property
    def discovery(self) -> str:
        return f"tcp://127.0.0.1:{self.discovery_port}"

    @property
    def procs(self) -> list[Proc]:
        head = [self.control_plane] if self.control_plane is not None else []
        return head + self.subworkers

    def start_control_plane(
        self,
        local_concurrency: int | None,
        state_dir: str | None = None,
        task_modules: tuple[str, ...] = TASK_MODULES,
        extra: tuple[str, ...] = (),
    ) -> Proc:
        """``local_concurrency=None`` keeps the control plane's default (the CPU count);
        ``extra`` flags come last, so they override the bench's own."""
        local = [] if local_concurrency is None else ["--local-concurrency", str(local_concurrency)]
        if state_dir is not None:
            local += ["--state-dir", state_dir]
        self.control_plane = self.supervisor.python_module(
            "control-plane",
            "fastworker.cli",
            "control-plane",
            *_task_modules_flags(task_modules),
            *("--base-port", str(self.base_port)),
            *("--discovery-port", str(self.discovery_port)),
            *CONTROL_PLANE_FLAGS,
            *local,
            *extra,
        )
        return self.control_plane

    def start_subworker(
        self,
        concurrency: int | None,
        task_modules: tuple[str, ...] = TASK_MODULES,
        processes: int | None = None,
    ) -> Proc:
        """``concurrency=None`` (``processes=None``) keeps the subworker's default (the CPU
        count)."""
        extra = [] if concurrency is None else ["--concurrency", str(concurrency)]
        if processes is not None:
            extra += ["--processes", str(processes)]
        proc = self.supervisor.python_module(
            "subworker",
            "fastworker.cli",
            "subworker",
            *_task_modules_flags(task_modules),
            *("--discovery-address", self.discovery),
            *SUBWORKER_FLAGS,
            *extra,
        )
        self.subworkers.append(proc)
        return proc

    @asynccontextmanager
    async def client(self) -> AsyncIterator[Client]:
        """A client that found the control plane; fails at once if a process died."""
        # The control plane may still be importing (slowly on a busy machine): finding it
        # may take READY_TIMEOUT, not the SDK's default connect_timeout of 3 s.
        client = Client(self.discovery, timeout=CLIENT_TIMEOUT, connect_timeout=READY_TIMEOUT)
        try:
            starting = asyncio.ensure_future(client.start())
            try:
                while not starting.done():
                    self.check_alive()
                    await asyncio.wait({starting}, timeout=_POLL)
            finally:
                starting.cancel()
            await starting
            yield client
        finally:
            client.stop()

    def control_plane_rss_mib(self) -> float:
        if self.control_plane is None:
            raise ClusterError("no control plane is running")
        return rss_mib(self.control_plane.pid)

    def dead_report(self) -> str:
        return "; ".join(p.describe_exit() for p in self.procs if not p.alive())

    def lost_a_port_race(self) -> bool:
        """Whether a process died because a port picked for it was bound by another
        server meanwhile (the cluster is then worth starting again on fresh ports)."""
        return any(not p.alive() and PORT_TAKEN in p.tail(4000) for p in self.procs)

    def check_alive(self) -> None:
        dead = self.dead_report()
        if dead:
            raise ClusterError(dead)

    async def wait_workers(self, client: Client, remote: int, local: bool) -> None:
        """Wait until ``remote`` subworkers (and the embedded one, if ``local``) are
        registered; fail at once if a process died."""

        async def ready() -> bool:
            self.check_alive()
            workers = await client.list_workers()
            has_local = any(w.local for w in workers)
            return has_local == local and sum(not w.local for w in workers) >= remote

        await wait_until(ready, READY_TIMEOUT, f"{remote} subworker(s) to register")

    async def settle(self) -> None:
        """Wait until the cluster may be measured (a replicated one: its follower in sync)."""

    async def check_measured(self) -> dict[str, float]:
        """What the topology adds to the repeat just measured (a replicated one: how long
        its leader acknowledged alone); ``ClusterError`` if it did not run as the topology
        says (its leader changed)."""
        return {}

    def stop(self) -> None:
        """Subworkers first (they unregister), then the control plane."""
        self.supervisor.stop(self.subworkers)
        if self.control_plane is not None:
            self.supervisor.stop([self.control_plane])
        self.subworkers, self.control_plane = [], None


def _task_modules_flags(modules: tuple[str, ...]) -> list[str]:
    return ["--task-modules", *modules]  # one flag: a repeated one keeps only its last values


@asynccontextmanager
async def cluster_session(supervisor: Supervisor) -> AsyncIterator[Cluster]:
    """A cluster with nothing started yet; whatever was started is stopped on exit, and an
    error says which of its processes died, if any did."""
    async with guarded(Cluster(supervisor)) as cluster:
        yield cluster


C = TypeVar("C", bound=Cluster)


@asynccontextmanager
async def guarded(cluster: C) -> AsyncIterator[C]:
    """``cluster`` (of any topology) stopped on exit, as ``cluster_session``'s is."""
    try:
        yield cluster
    except Exception as exc:
        dead = "" if isinstance(exc, ClusterError) else cluster.dead_report()
        if dead:
            raise ClusterError(f"{type(exc).__name__}: {exc} [{dead}]") from exc
        raise
    finally:
        cluster.stop()


@asynccontextmanager
async def running_cluster(
    supervisor: Supervisor, topology: str, worker_concurrency: int | None = None
) -> AsyncIterator[tuple[Cluster, Client]]:
    """A ready cluster of ``topology`` and a client connected to it; stopped on exit.

    ``worker_concurrency`` is the concurrency of whatever runs tasks (the control plane's
    local concurrency for ``cp``, each subworker's otherwise); ``None`` keeps the defaults.
    A ``cpu_bound`` topology has its own (``CPU_WORKERS``).
    """
    subworkers = SUBWORKERS[topology]
    processes: int | None = None
    modules = TASK_MODULES
    if topology in CPU_WORKERS:
        processes, worker_concurrency = CPU_WORKERS[topology]
        modules = CPU_TASK_MODULES
    local = worker_concurrency if subworkers == 0 else 0

    async def start(cluster: Cluster, state: Path) -> None:
        cluster.start_control_plane(local, str(state) if topology in JOURNALED else None, modules)
        for _ in range(subworkers):
            cluster.start_subworker(worker_concurrency, modules, processes)

    async with started(lambda: Cluster(supervisor), start, "fastworker-bench-") as (cluster, c):
        await cluster.wait_workers(c, remote=subworkers, local=subworkers == 0)
        yield cluster, c


@asynccontextmanager
async def started(
    make: Callable[[], C], start: Callable[[C, Path], Awaitable[None]], prefix: str
) -> AsyncIterator[tuple[C, Client]]:
    """A cluster ``make`` builds, started by ``start`` in a fresh state directory, and a
    client connected to it; stopped (and the directory removed) on exit. A start that lost
    a port race (a port was bound by another server between its pick and its bind) is tried
    again on fresh ports, a few times."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        with tempfile.TemporaryDirectory(prefix=prefix) as state:
            async with guarded(make()) as cluster, AsyncExitStack() as stack:
                try:
                    await start(cluster, Path(state))
                    client = await stack.enter_async_context(cluster.client())
                except ClusterError:
                    if attempt < PORT_ATTEMPTS and cluster.lost_a_port_race():
                        continue
                    raise
                yield cluster, client
                return
