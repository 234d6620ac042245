"""The control plane process: binds every socket to the endpoints ``assembly`` builds,
runs the embedded subworker and the upkeep loop, and shuts all of it down in order."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pynng
import structlog

from fastworker import TaskRegistry, __version__, default_registry
from fastworker.tracing import active_tracer
from fastworker_common.health import PortInUse
from fastworker_common.supervision import Fault, Supervisor, TaskDied
from fastworker_control_plane.assembly import Assembly, Endpoint
from fastworker_control_plane.config import ControlPlaneConfig
from fastworker_control_plane.durability.entries import snapshot
from fastworker_control_plane.durability.journal import Journal, JournalError
from fastworker_control_plane.engine import Clock
from fastworker_control_plane.ha import addresses
from fastworker_control_plane.ha.leader import LeaderReplication, Leadership
from fastworker_control_plane.metrics import control_plane_registry
from fastworker_control_plane.reclaim import Reclaimer
from fastworker_control_plane.servers.discovery import DiscoveryAnnouncer
from fastworker_control_plane.servers.reply_server import ReplyServer
from fastworker_control_plane.tracing import DispatchTracer
from fastworker_protocol import Announce, Codec, Priority
from fastworker_subworker import Subworker, SubworkerConfig

if TYPE_CHECKING:
    from fastworker_common.web import WebServer

log = structlog.get_logger(__name__)


class ControlPlane:
    def __init__(
        self,
        config: ControlPlaneConfig | None = None,
        registry: TaskRegistry | None = None,
        *,
        clock: Clock = time.time,
        leadership: Leadership | None = None,
    ) -> None:
        """``leadership``: this control plane leads replicas (``ha.node`` makes it)."""
        self.config = config or ControlPlaneConfig()
        self.registry = registry if registry is not None else default_registry
        self.leadership = leadership
        if leadership is None:
            self.instance_id = uuid.uuid4().hex
        else:
            self.instance_id = addresses.instance_id(leadership.candidate_id, leadership.epoch)
        self.codec = Codec(self.config.max_message_size)
        self.assembly = Assembly(
            self.config, self.registry, instance_id=self.instance_id, clock=clock
        )
        self.engine = self.assembly.engine
        self._servers: list[ReplyServer] = []
        self._announcer: DiscoveryAnnouncer | None = None
        self._local: Subworker | None = None
        self._local_run: asyncio.Task[None] | None = None
        self._background: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()
        # A long-lived task that dies stops the process (see ``supervision``).
        self._supervisor = Supervisor(self._faulted)
        self.reclaimer = Reclaimer()  # memory freed in bulk goes back to the system
        self._local_address = f"inproc://fastworker-{self.instance_id}"
        self._web: WebServer | None = None
        self._journal: Journal | None = None
        self.replication: LeaderReplication | None = None
        self._replication_socket: pynng.Socket | None = None
        # Read once: a missing or unreadable certificate fails here, before any socket.
        self._tls_config = None if self.config.tls is None else self.config.tls.listening()
        self._serving = False
        self.started_at = time.time()

    @property
    def announcement(self) -> Announce:
        epoch = 0 if self.leadership is None else self.leadership.epoch
        return announcement(self.config, self.instance_id, epoch)

    async def start(self) -> None:
        """Bind every socket and start serving; on failure nothing is left open."""
        tracer = active_tracer()
        if tracer is not None:
            self.engine.dispatch_tracer = DispatchTracer(tracer)
        try:
            self._recover()
            self._local = self._embedded_subworker()
            # HTTP first: a port taken there fails the start before any request is served
            # (a client or subworker would otherwise meet a control plane about to exit).
            await self._start_web()
            self._start()
        except BaseException:
            await self.close()
            raise
        self._serving = True

    def _embedded_subworker(self) -> Subworker | None:
        """The subworker that runs tasks in this process (not started), if it has any."""
        cfg = self.config
        if not cfg.local_concurrency:
            return None
        return Subworker(
            SubworkerConfig(
                concurrency=cfg.local_concurrency,
                queues=cfg.local_queues,
                processes=cfg.local_processes,
                max_tasks_per_child=cfg.max_tasks_per_child,
                max_memory_per_child=cfg.max_memory_per_child,
                shutdown_timeout=cfg.shutdown_timeout,
                max_message_size=cfg.max_message_size,
                auth_token=cfg.auth_token,
            ),
            self.registry,
            registration_address=self._local_address,
            worker_id=f"local-{self.instance_id[:12]}",
        )

    async def _start_web(self) -> None:
        if not self.config.http_port:
            return
        # Imported here: the web stack (aiohttp, the dashboard) is half a second of start-up
        # that a control plane without an HTTP port never needs.
        from fastworker_common.web import WebServer
        from fastworker_control_plane.dashboard import replicas
        from fastworker_control_plane.dashboard.routes import DashboardRoutes
        from fastworker_control_plane.dashboard.views import Identity

        routes = DashboardRoutes(
            self.engine,
            Identity(self.instance_id, self.started_at),
            replicas.reader(self.config.replica_name, self.leadership, self.replication),
        )
        leadership = self.leadership
        self._web = WebServer(
            self.config.bind_host,
            self.config.http_port,
            control_plane_registry(
                self.engine, self._local, () if leadership is None else leadership.collectors
            ),
            self.readiness,
            routes.routes(),
            self.config.tokens,
            details=None if leadership is None else leadership.details,
        )
        await self._web.start()

    def readiness(self) -> str | None:
        """``None`` while serving; otherwise why not (for ``/readyz``)."""
        if self._supervisor.fault is not None:
            return str(self._supervisor.fault)
        if not self.engine.accepting or self._stop.is_set():
            return "stopping"
        if not self._serving:
            return "starting"
        if (fenced := self._fence()) is not None:
            return fenced
        journal = self.engine.journal
        if journal is not None and journal.problem is not None:
            return f"journal cannot be written: {journal.problem}"
        return None

    def _fence(self) -> str | None:
        """Why this process must not answer as the leader now (None: it may)."""
        leadership = self.leadership
        if leadership is None or leadership.leading():
            return None
        return f"this control plane is no longer the leader (its term was epoch {leadership.epoch})"

    def _faulted(self, fault: Fault) -> None:
        self._stop.set()  # ``run`` closes everything, then raises

    def _recover(self) -> None:
        """With a state dir: replay the journal onto the board and keep appending to it
        (the writer compacts it later: starting needs no free space)."""
        if self.config.state_dir is None:
            return
        journal = Journal(Path(self.config.state_dir))
        self._journal = journal
        replayed = journal.load(salvage=self.config.salvage_journal)
        board = self.engine.board
        in_doubt = replayed.recovered.restore(board, self.engine.clock())
        if dropped := replayed.recovered.dropped_schedules:
            log.warning(
                "run-time schedules dropped: their time zone is unknown here", schedules=dropped
            )
        book = self.engine.workflows.book
        outstanding = book.restore(replayed.recovered.workflows, self.engine.clock())
        try:
            writer = journal.start(
                lambda: [*snapshot(board, self.engine.clock()), *book.snapshot()]
            )
        except OSError as exc:
            raise JournalError(f"cannot write the journal in {journal.directory}: {exc}") from exc
        self._supervisor.watch("the journal writer", writer, journal.fail)
        self.engine.keep_journal(journal)
        if self.leadership is not None:
            self._replicate(journal, self.leadership)
        self.engine.workflows.carry_out(outstanding)  # journaled from here on
        log.info(
            "journal replayed",
            state_dir=self.config.state_dir,
            live=len(board),
            results=len(board.results),
            held_by_subworkers=in_doubt,
            schedules=len(replayed.recovered.periodics),
            workflows=len(book),
            torn_bytes=replayed.torn,
            skipped_bytes=sum(gap.size for gap in replayed.skipped),
        )

    def _replicate(self, journal: Journal, leadership: Leadership) -> None:
        """Serve the journal to followers; acknowledge only what enough of them have."""
        replication = LeaderReplication(
            journal,
            leadership.epoch,
            leadership.leading,
            leadership.settings,
            on_step_down=leadership.on_step_down,
            record_alone=leadership.record_alone,
            auth_token=self.config.tokens,
        )
        self.replication = replication
        self.engine.replication = replication
        address = self.config.bind(self.config.replication_port_number)
        self._replication_socket = self._bind(pynng.Rep0, [address])
        self._supervisor.spawn("replication", replication.serve(self._replication_socket))
        self._supervisor.spawn("replication judge", replication.judge())

    def _start(self) -> None:
        cfg, ports, engine = self.config, self.config.ports, self.engine
        local_id = None if self._local is None else self._local.worker_id
        endpoints = self.assembly.open(local_id)
        for priority, endpoint in endpoints.submission.items():
            self._serve(endpoint, [cfg.bind(ports.submission(priority))])
        self._serve(endpoints.results, [cfg.bind(ports.results)])
        reg = self._serve(
            endpoints.registration, [cfg.bind(ports.registration), self._local_address]
        )
        loop = asyncio.get_running_loop()
        reg.add_post_pipe_remove_cb(lambda pipe: _call_soon(loop, engine.pipe_closed, pipe.id))
        bus = self._bind(pynng.Bus0, [cfg.bind(cfg.discovery_port)])
        self._announcer = DiscoveryAnnouncer(
            bus, self.codec, self.announcement, cfg.announce_interval
        )
        for name, task in self._announcer.start().items():
            self._supervisor.watch(name, task)
        self._background.append(self._supervisor.spawn("the upkeep loop", self.assembly.upkeep()))
        if self._local is not None:
            self._local_run = self._supervisor.spawn("the embedded subworker", self._local.run())
        log.info(
            "control plane started",
            instance=self.instance_id,
            submit=self.announcement.submit[0],
            discovery=cfg.bind(cfg.discovery_port),
            advertised=cfg.advertised,
            local_concurrency=cfg.local_concurrency,
            tasks=engine.view.known_task_names(),
        )

    def _bind(self, factory: type[pynng.Socket], addresses: list[str]) -> pynng.Socket:
        sock = factory(
            recv_max_size=2 * self.codec.max_message_size,
            async_backend="asyncio",
            tls_config=self._tls_config,
        )
        try:
            for address in addresses:
                sock.listen(address)
        except pynng.AddressInUse:
            sock.close()
            raise PortInUse(
                f"{addresses[0]} is already in use: is another control plane "
                "running? (choose other ports with --base-port/--discovery-port)"
            ) from None
        return sock

    def _serve(self, endpoint: Endpoint, addresses: list[str]) -> pynng.Socket:
        sock = self._bind(pynng.Rep0, addresses)
        name = endpoint.name
        server = ReplyServer(
            name,
            sock,
            self.codec,
            endpoint.handler,
            endpoint.serves,
            self.config.tokens,
            fence=self._fence,
        )
        server.on_fault = lambda error: self._supervisor.report(f"the {name} server", error)
        server.on_bulk_release = self.reclaimer.request
        server.start()
        self._servers.append(server)
        return sock

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Start, serve until ``request_stop``, then shut down. Raises ``TaskDied`` if a
        task the control plane cannot run without died (the process must not go on)."""
        await self.start()
        try:
            await self._stop.wait()
        finally:
            await self.close()
        fault = self._supervisor.fault
        if fault is not None:
            raise TaskDied(f"stopped: {fault}") from fault.error

    async def close(self) -> None:
        """Drain the embedded subworker, stop taking work, close every socket."""
        self._supervisor.stop()
        if self._local is not None and self._local_run is not None:
            self._local.request_stop()
            await asyncio.gather(self._local_run, return_exceptions=True)
            self._local, self._local_run = None, None
        self.engine.close()
        if self._web is not None:
            await self._web.close()
            self._web = None
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await asyncio.gather(*(server.close() for server in self._servers))
        if self._announcer is not None:
            await self._announcer.close()
        self._servers, self._background, self._announcer = [], [], None
        self.reclaimer.cancel()
        if self.replication is not None:
            self.replication.close()
        if self._replication_socket is not None:
            self._replication_socket.close()
            self._replication_socket = None
        if self._journal is not None:
            await self._journal.close()
            self._journal = None
        log.info("control plane stopped", instance=self.instance_id)


def announcement(config: ControlPlaneConfig, instance_id: str, epoch: int = 0) -> Announce:
    """What a control plane with ``config`` announces on the discovery bus."""
    ports = config.ports
    return Announce(
        instance_id=instance_id,
        submit=[config.advertise(ports.submission(p)) for p in Priority.by_rank()],
        results=config.advertise(ports.results),
        registration=config.advertise(ports.registration),
        version=__version__,
        epoch=epoch,
    )


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[[int], None], arg: int) -> None:
    """Hand a callback from an NNG thread to the event loop, unless it has closed."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, arg)
