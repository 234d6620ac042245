"""The subworker: finds the control plane, registers its tasks, pulls work and runs it.

Lifecycle (the protocol's worker state machine): INIT -> STARTING (locate and register)
-> RUNNING (fetch, execute, report) -> DRAINING (no new work; in-flight tasks get
``shutdown_timeout`` seconds, then are cancelled and handed back for redelivery) ->
STOPPING (flush reports, unregister) -> STOPPED.

If the control plane restarts (a new instance announces itself, or it answers
``unknown_worker``), the subworker registers again by itself. One that refuses its token
(``unauthorized``) is not retried: no retry can fix it, so the subworker drains and ``run``
raises ``Unauthorized``. Replicated control planes
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
from typing import TYPE_CHECKING

import structlog

from fastworker import (
    ControlPlaneUnavailable,
    RequestRejected,
    TaskRegistry,
    Timeout,
    Unauthorized,
    signals,
)
from fastworker import default_registry as _default_registry
from fastworker.signal_hooks import worker_event, worker_signal
from fastworker.tracing import active_tracer
from fastworker_common.discovery import DiscoveryPeer
from fastworker_common.supervision import Fault, Policy, Supervisor
from fastworker_protocol import (
    Codec,
    WorkerEvent,
    WorkerState,
    next_worker_state,
)
from fastworker_subworker.child_wire import Spec
from fastworker_subworker.config import SubworkerConfig
from fastworker_subworker.exchange import Exchange, Outbox
from fastworker_subworker.executor import Executor
from fastworker_subworker.instrument import TaskInstrument
from fastworker_subworker.link import Channel, ControlPlaneLink
from fastworker_subworker.processes import (
    ProcessPool,
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
        # The exchange's death drains the subworker (see ``_faulted``).
        self._supervisor = Supervisor(self._faulted, permanent=(Unauthorized,))
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
            hook_modules=signals.handler_modules(),
        )
        return ProcessPool(spec, self.config.pool_options())

    # --- control -------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Begin a graceful drain (what SIGTERM does)."""
        self._supervisor.stop()
        self._stop_requested.set()

    def _faulted(self, fault: Fault) -> None:
        """The exchange died: drain as if asked to stop (``run`` raises it afterwards if it
        is an ``Unauthorized``: the token is wrong, and a restart would not fix it)."""
        self.request_stop()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    @property
    def in_flight(self) -> int:
        return self._runner.held if self._runner is not None else 0

    @property
    def quick_lane_runs(self) -> int:
        """Tasks run on the quick lane's thread (``quick_lane``), fetch to outcome."""
        return self._exchange.lane_runs if self._exchange is not None else 0

    @property
    def quick_lane_lent(self) -> bool:
        """The quick lane fetches for this worker now."""
        return self._exchange is not None and self._exchange.lane_lent

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
        watching: asyncio.Task[None] | None = None
        web = self._web_server()
        this_process = worker_event(self.worker_id, child=False)
        await worker_signal(signals.worker_process_init, this_process)
        try:
            await runner.start()
            if web is not None:
                await web.start()
            self._address = self._fixed_address or await self._locate(discovery)
            if self._address is not None:
                self._link = self._new_link(self._address)
                if discovery is not None:  # from now: the first leader may be gone already
                    watching = self._supervisor.spawn(
                        "the discovery watch", self._watch(discovery), policy=Policy.LOG
                    )
                if await self._register():
                    await self._serve(runner, exchange)
        finally:
            await self._supervisor.end(watching)
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
            await worker_signal(signals.worker_shutdown, this_process)

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

    async def _serve(self, runner: TaskRunner, exchange: Exchange) -> None:
        """RUNNING until asked to stop (or the exchange dies), then DRAINING, then
        STOPPING."""
        assert self._link is not None
        self._advance(WorkerEvent.READY)
        self._ready.set()
        exchanging = self._supervisor.spawn(
            "the exchange", exchange.run(self._stop_requested, hold=True, ready=self._registered)
        )
        await self._stop_requested.wait()
        self._advance(WorkerEvent.DRAIN)
        await asyncio.gather(exchanging, return_exceptions=True)
        await self._drain(runner, exchange)
        self._advance(WorkerEvent.STOP)
        if self._link.connected:
            await self._hand_over(exchange)
            with contextlib.suppress(ControlPlaneUnavailable, Timeout, RequestRejected):
                await self._link.unregister(_GOODBYE_TIMEOUT)
        fault = self._supervisor.fault
        if fault is not None and isinstance(fault.error, Unauthorized):
            raise fault.error

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
                    self.config.name,
                    self.config.concurrency,
                    signatures,
                    self.config.queues,
                    self._holding(),
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

    def _holding(self) -> list[str]:
        """What it holds, for a control plane that took over: tasks running or waiting
        for a slot, and those finished with their outcome not yet reported."""
        running = self._runner.holding if self._runner is not None else []
        return [*running, *self._outbox.unreported]

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
