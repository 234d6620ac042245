"""The subworker: finds the control plane, registers its tasks, pulls work and runs it.

Lifecycle (the protocol's worker state machine): INIT -> STARTING (locate and register)
-> RUNNING (fetch, execute, report) -> DRAINING (no new work; in-flight tasks get
``shutdown_timeout`` seconds, then are cancelled and handed back for redelivery) ->
STOPPING (flush reports, unregister) -> STOPPED.

If the control plane restarts (a new instance announces itself, or it answers
``unknown_worker``), the subworker registers again by itself. Replicated control planes
look the same from here: their discovery addresses are listed (comma-separated), every
replica announces the leader, and a new leader is a new instance announcing itself; until
one does, a deposed leader's ``unavailable`` is retried like a lost connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from fastworker import ControlPlaneUnavailable, RequestRejected, TaskRegistry, Timeout
from fastworker import default_registry as _default_registry
from fastworker.tls import TLS
from fastworker.tracing import active_tracer
from fastworker_common.discovery import DiscoveryPeer
from fastworker_protocol import (
    DEFAULT_DISCOVERY_ADDRESS,
    DEFAULT_MAX_MESSAGE_SIZE,
    Codec,
    WorkerEvent,
    WorkerState,
    next_worker_state,
)
from fastworker_subworker.child_wire import Spec
from fastworker_subworker.exchange import Exchange, Outbox
from fastworker_subworker.executor import Executor
from fastworker_subworker.instrument import TaskInstrument
from fastworker_subworker.link import Channel, ControlPlaneLink
from fastworker_subworker.processes import (
    PoolOptions,
    ProcessPool,
    cpu_count,
    log_settings,
    task_refs,
)
from fastworker_subworker.runner import TaskRunner
from fastworker_subworker.stats import RunStats
from fastworker_subworker.stops import interrupted

if TYPE_CHECKING:
    from fastworker_common.web import WebServer

log = structlog.get_logger(__name__)

_RETRY_DELAY = 0.5
_GOODBYE_TIMEOUT = 2.0  # for the last messages: the control plane may already be gone


def _default_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class SubworkerConfig:
    discovery_address: str = DEFAULT_DISCOVERY_ADDRESS
    concurrency: int = field(default_factory=lambda: os.cpu_count() or 1)
    shutdown_timeout: float = 30.0
    fetch_wait: float = 1.0
    request_timeout: float = 10.0
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    name: str = field(default_factory=_default_name)
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None  # serve /metrics, /healthz and /readyz there
    # The control plane's shared token, when it requires one (never shown in a repr).
    auth_token: str | None = field(default=None, repr=False)
    tls: TLS | None = None  # for tls+tcp:// control planes: the CA (and own certificate)
    # Queues served, -> weight in the fair share (None: every queue its tasks name).
    queues: dict[str, int] | None = None
    # The process pool (started only when a task has pool="process"): its children, and
    # when one is recycled: after this many tasks, or past this resident memory (MiB).
    processes: int = field(default_factory=cpu_count)
    max_tasks_per_child: int | None = None
    max_memory_per_child: int | None = None

    def pool_options(self) -> PoolOptions:
        memory = self.max_memory_per_child
        return PoolOptions(
            self.processes, self.max_tasks_per_child, None if memory is None else memory << 20
        )


class Subworker:
    def __init__(
        self,
        config: SubworkerConfig | None = None,
        registry: TaskRegistry | None = None,
        *,
        registration_address: str | None = None,
        worker_id: str | None = None,
        channel: Callable[[str], Channel] | None = None,
    ) -> None:
        """``channel`` makes the channel to a registration address (default: NNG's)."""
        self.config = config or SubworkerConfig()
        self._make_channel = channel
        self.registry = registry if registry is not None else _default_registry
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.state = WorkerState.INIT
        self._fixed_address = registration_address
        self._codec = Codec(self.config.max_message_size)
        self._stop_requested = asyncio.Event()
        self._ready = asyncio.Event()
        self._needs_register = False
        self._instance_id: str | None = None
        self._address: str | None = registration_address
        self._link: ControlPlaneLink | None = None
        self._outbox = Outbox()
        self._runner: TaskRunner | None = None
        self._exchange: Exchange | None = None
        self.stats = RunStats()
        self.processes = self._process_pool()

    def _process_pool(self) -> ProcessPool | None:
        """The children for ``pool="process"`` tasks, if there are any (not started)."""
        refs = task_refs(self.registry)
        if not refs:
            return None
        level, as_json = log_settings()
        spec = Spec(
            sys_path=list(sys.path),
            tasks=refs,
            worker_id=self.worker_id,
            log_level=level,
            log_json=as_json,
        )
        return ProcessPool(spec, self.config.pool_options())

    # --- control -------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Begin a graceful drain (what SIGTERM does)."""
        self._stop_requested.set()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    @property
    def in_flight(self) -> int:
        return self._runner.held if self._runner is not None else 0

    @property
    def outside_loop(self) -> int:
        """Tasks on a thread or in a child process now (see ``TaskRunner.outside_loop``)."""
        return self._runner.outside_loop if self._runner is not None else 0

    @property
    def registered(self) -> bool:
        return self._instance_id is not None and not self._needs_register

    def readiness(self) -> str | None:
        """``None`` while running and registered; otherwise why not (for ``/readyz``)."""
        if self.state in (WorkerState.DRAINING, WorkerState.STOPPING, WorkerState.STOPPED):
            return "stopping"
        if self.state != WorkerState.RUNNING or not self.registered:
            return "starting"
        return None

    def _advance(self, event: WorkerEvent) -> None:
        self.state = next_worker_state(self.state, event)
        log.info("subworker state", worker_id=self.worker_id, state=str(self.state))

    # --- run -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until ``request_stop`` (or until no control plane can be reached before it)."""
        self._advance(WorkerEvent.START)
        discovery = (
            None
            if self._fixed_address is not None
            else DiscoveryPeer(
                self.config.discovery_address, self._codec, role="subworker", tls=self.config.tls
            )
        )
        runner = TaskRunner(
            Executor(self.registry, TaskInstrument(self.worker_id, active_tracer())),
            self.config.concurrency,
            self._outbox.started,
            self._outbox.finished,
            self.stats,
            self.processes,
        )
        self._runner = runner
        exchange = Exchange(
            self._outbox, runner, self.config.fetch_wait, self._mark_unregistered, self._pause
        )
        self._exchange = exchange
        background: list[asyncio.Task[None]] = []
        web = self._web_server()
        try:
            await runner.start()
            if web is not None:
                await web.start()
            self._address = self._fixed_address or await self._locate(discovery)
            if self._address is not None:
                self._link = self._new_link(self._address)
                if discovery is not None:  # from now: the first leader may be gone already
                    background.append(
                        asyncio.get_running_loop().create_task(self._watch(discovery))
                    )
                if await self._register():
                    await self._serve(runner, exchange, background)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            exchange.close()
            await runner.close()
            if self._link is not None:
                self._link.close()
            if discovery is not None:
                await discovery.aclose()
            if web is not None:
                await web.close()
            if self.state not in (WorkerState.STOPPING, WorkerState.STOPPED):
                self._advance(WorkerEvent.STOP)
            if self.state == WorkerState.STOPPING:
                self._advance(WorkerEvent.STOPPED)

    def _new_link(self, address: str) -> ControlPlaneLink:
        cfg = self.config
        return ControlPlaneLink(
            address,
            self._codec,
            self.worker_id,
            cfg.request_timeout,
            cfg.auth_token,
            cfg.tls,
            channel=None if self._make_channel is None else self._make_channel(address),
        )

    def _web_server(self) -> WebServer | None:
        if self.config.metrics_port is None:
            return None
        # Imported here: aiohttp and prometheus-client add about 0.25 s to the start of
        # every subworker, and most run without an HTTP port.
        from fastworker_common.web import WebServer
        from fastworker_subworker.metrics import subworker_registry

        return WebServer(
            self.config.metrics_host,
            self.config.metrics_port,
            subworker_registry(self),
            self.readiness,
            auth=self.config.auth_token,
        )

    async def _serve(
        self,
        runner: TaskRunner,
        exchange: Exchange,
        background: list[asyncio.Task[None]],
    ) -> None:
        """RUNNING until asked to stop, then DRAINING, then STOPPING."""
        assert self._link is not None
        self._advance(WorkerEvent.READY)
        self._ready.set()
        loop = asyncio.get_running_loop()
        exchanging = loop.create_task(
            exchange.run(self._stop_requested, hold=True, ready=self._registered)
        )
        stopping = loop.create_task(self._stop_requested.wait())
        await asyncio.wait([exchanging, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        await asyncio.gather(stopping, return_exceptions=True)
        self._advance(WorkerEvent.DRAIN)
        if exchanging.done() and not exchanging.cancelled() and exchanging.exception():
            log.error("exchange failed; draining", exc_info=exchanging.exception())
        await asyncio.gather(exchanging, return_exceptions=True)
        await self._drain(runner, exchange)
        self._advance(WorkerEvent.STOP)
        if self._link.connected:
            await self._hand_over(exchange)
            with contextlib.suppress(ControlPlaneUnavailable, Timeout, RequestRejected):
                await self._link.unregister(_GOODBYE_TIMEOUT)

    async def _hand_over(self, exchange: Exchange) -> None:
        """Send what is left before leaving. A control plane that forgot this worker (it
        restarted, or expelled it during a freeze) still takes finished outcomes once it
        registers again, so those tasks need not run twice: try that twice at most."""
        for _ in range(2):
            if not await self._registered():
                return
            await exchange.settle(_GOODBYE_TIMEOUT, lambda: self.registered)
            if self.registered or not self._outbox.pending:
                return

    async def _locate(self, discovery: DiscoveryPeer | None) -> str | None:
        assert discovery is not None
        while not self._stop_requested.is_set():
            try:
                announce = await discovery.announcement(timeout=_RETRY_DELAY * 2)
            except ControlPlaneUnavailable:
                log.info("waiting for a control plane", discovery=discovery.address)
                continue
            return announce.registration
        return None

    async def _register(self) -> bool:
        signatures = [t.signature() for t in self.registry]
        while True:
            self._follow()
            assert self._link is not None
            try:
                registered = await self._link.register(
                    self.config.name, self.config.concurrency, signatures, self.config.queues
                )
            except (ControlPlaneUnavailable, Timeout) as exc:
                if self._stop_requested.is_set():  # stopping: one try per call is enough
                    return False
                log.warning("registration failed; retrying", error=str(exc))
                await self._pause()
                continue
            self._needs_register = False
            self._instance_id = registered.control_plane_id
            log.info(
                "registered",
                worker_id=self.worker_id,
                address=self._link.address,
                control_plane=registered.control_plane_id,
                tasks=self.registry.names(),
            )
            if self._stop_requested.is_set():
                # Back only to hand over what finished while it drains: it takes no work.
                with contextlib.suppress(ControlPlaneUnavailable, Timeout, RequestRejected):
                    await self._link.drain(_GOODBYE_TIMEOUT)
            return True

    def _follow(self) -> None:
        """Talk to the latest control plane announced (``_watch`` may have heard another
        while a registration was being retried)."""
        assert self._link is not None
        assert self._address is not None
        if self._link.address != self._address:  # the control plane moved
            self._link.close()
            self._link = self._new_link(self._address)
        if self._exchange is not None:
            self._exchange.link = self._link

    async def _registered(self) -> bool:
        """Register again first if the control plane has forgotten this worker."""
        return not self._needs_register or await self._register()

    def _mark_unregistered(self) -> None:
        self._needs_register = True

    async def _watch(self, discovery: DiscoveryPeer) -> None:
        """Register again when a different control plane instance announces itself."""
        async for announce in discovery.announcements():
            if self._instance_id is None and announce.registration == self._address:
                continue  # the one being registered with, heard again
            if announce.instance_id != self._instance_id:
                log.info("new control plane instance", instance=announce.instance_id)
                self._address = announce.registration
                self._needs_register = True
                if self._link is not None and self._link.address != self._address:
                    self._link.close()  # requests to the old address fail now, not on timeout

    async def _drain(self, runner: TaskRunner, exchange: Exchange) -> None:
        """Stop taking work, give held tasks ``shutdown_timeout`` while reporting what
        finishes, then hand back the rest."""
        assert self._link is not None
        if self._link.connected:
            with contextlib.suppress(ControlPlaneUnavailable, Timeout, RequestRejected):
                await self._link.drain(_GOODBYE_TIMEOUT)
            # The control plane answers a draining worker's fetches at once, so outstanding
            # ones come back (with any tasks dispatched just before: they run like the others).
            await exchange.settle(
                self.config.fetch_wait + _GOODBYE_TIMEOUT, lambda: self.registered
            )
        if runner.held:
            log.info("draining", in_flight=runner.held, timeout=self.config.shutdown_timeout)
        drained = asyncio.Event()
        reporting = asyncio.get_running_loop().create_task(
            exchange.run(drained, hold=False, ready=self._registered)
        )
        try:
            unfinished = await runner.drain(self.config.shutdown_timeout)
        finally:
            drained.set()
            await asyncio.gather(reporting, return_exceptions=True)
        for task_id in unfinished:
            log.warning("task interrupted by shutdown", task_id=task_id)
        self._outbox.finished([interrupted(task_id) for task_id in unfinished])

    async def _pause(self, delay: float = _RETRY_DELAY) -> None:
        """Wait ``delay`` seconds before trying again. A stop request cuts a longer wait to
        ``_RETRY_DELAY``: a drain is neither held up by a long backoff nor left to spin."""
        loop = asyncio.get_running_loop()
        floor = loop.time() + min(delay, _RETRY_DELAY)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop_requested.wait(), delay)
        await asyncio.sleep(max(0.0, floor - loop.time()))
