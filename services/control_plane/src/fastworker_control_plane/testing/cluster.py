"""``Cluster``: a whole FastWorker cluster inside a test process, on a clock the test moves.

The parts are the real ones: the control plane's engine and task board (its queues,
dispatch, retries and backoff, schedules, result cache), the request handlers behind its
sockets, and real ``Subworker``s running tasks on their event loop, threads and child
processes. Only the transport is replaced: each request's bytes go straight to the
handler that would have received them (``Responder``), through the same codec, and the
clients of this process (``Client``, ``SyncClient``, ``add.delay()``) talk to it with no
address while it runs.

It all runs on one event loop in a thread of its own, whose clock can skip ahead
(``clock.SkippingLoop``). Time passes as usual until the test asks for more:
``advance(seconds)`` moves the clock that far, firing every timer on the way (countdowns,
ETAs, retry backoffs, periodic and cron ticks, result expiry) and returns once what became
due has run. ``drain()`` skips ahead only as far as the pending tasks need. A client
waiting for a result also lets time skip (as Temporal's time-skipping test server does), so
``client.wait(task_id)`` of a task due in an hour returns at once. The clock never skips
while a task runs on a thread or in a child: that time is real.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar

from fastworker import SyncClient, TaskRegistry, default_registry
from fastworker_common import local
from fastworker_common.errors import FastWorkerError, Timeout, rejection
from fastworker_common.supervision import Fault, Supervisor
from fastworker_control_plane.assembly import Assembly, Endpoint, Pace
from fastworker_control_plane.config import ControlPlaneConfig
from fastworker_control_plane.core.result_cache import DEFAULT_TTL
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.servers.responder import Responder
from fastworker_control_plane.testing.clock import SkippingLoop
from fastworker_protocol import Codec, DecodeError, Error, Message, Priority, TaskResult, TaskState
from fastworker_subworker import Subworker, SubworkerConfig

T = TypeVar("T")
M = TypeVar("M", bound=Message)

# Each wakeup of the loop costs real time when the clock skips a day, so the cluster's
# periodic work is sparser than a control plane's (upkeep every 1 s, fetches held 5 s):
# nothing here depends on it but how soon a silent subworker is noticed.
_PACE = Pace(upkeep_interval=20.0, sweep_every=6, max_fetch_wait=20.0)
_MAX_WAIT = 366 * 24 * 3600.0  # a held wait's cap (a control plane's default: an hour)
_HEARTBEAT_TIMEOUT = 90.0  # a subworker is silent while the clock skips: be patient
_CLIENTS = 0  # the connection id of every client request
_SETTLE = 0.05  # past the goal, timers this close still run: hand-overs in flight
_WAITING = (TaskState.PENDING, TaskState.QUEUED, TaskState.SCHEDULED, TaskState.RETRYING)


class ClusterError(FastWorkerError):
    """The test cluster could not do what was asked (a deadline passed, a part died)."""


@dataclass
class _Goal:
    """What the test thread waits for: the clock at ``until`` with everything due run
    (``drain``: no task left to run, skipping no further than ``until``)."""

    until: float  # loop time
    drain: bool
    done: threading.Event
    failure: str | None = None


class Cluster:
    """The control plane and ``workers`` subworkers in this process (see the module)."""

    def __init__(
        self,
        registry: TaskRegistry | None = None,
        *,
        workers: int = 1,
        concurrency: int = 4,
        queues: dict[str, int] | None = None,
        start: datetime | float | None = None,
        result_ttl: float = DEFAULT_TTL,
        max_redeliveries: int = 3,
        wall_timeout: float = 60.0,
    ) -> None:
        """``start`` is the time the clock starts at (default: now). ``wall_timeout`` bounds
        the real seconds ``advance`` and ``drain`` may take."""
        if workers < 0:
            raise ValueError("workers cannot be negative")
        self.registry = registry if registry is not None else default_registry
        self.name = "the in-process test cluster (fastworker.testing.Cluster)"
        self.wall_timeout = wall_timeout
        self._worker_count = workers
        self._concurrency = concurrency
        self._queues = queues
        self._start_time = start.timestamp() if isinstance(start, datetime) else start
        self._config = ControlPlaneConfig(
            local_concurrency=0,  # the subworkers below run the tasks
            http_port=0,
            result_ttl=result_ttl,
            max_redeliveries=max_redeliveries,
            heartbeat_timeout=_HEARTBEAT_TIMEOUT,
            max_wait=_MAX_WAIT,
        )
        self._codec = Codec()
        self._loop = SkippingLoop(self._skip)
        self._thread: threading.Thread | None = None
        self._epoch = 0.0
        self._goal: _Goal | None = None
        self._held = 0  # client requests being answered (waits let time skip)
        self._stopping = False
        self._fault: BaseException | None = None
        self._background: list[asyncio.Task[None]] = []  # the subworkers
        self._supervisor = Supervisor(self._faulted)  # a subworker that dies ends the goal
        self._upkeep: asyncio.Task[None] | None = None
        self.workers: list[Subworker] = []
        self._engine: Engine | None = None
        self._submit: dict[Priority, Responder] = {}
        self._results: Responder | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the loop, the engine and the subworkers; clients started from now on in
        this process use this cluster."""
        if self._thread is not None:
            return self
        if self._loop.is_closed():
            raise ClusterError("a stopped Cluster cannot start again: make a new one")
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fastworker-test-cluster", daemon=True
        )
        self._thread.start()
        try:
            self._call(self._boot())
        except BaseException:
            self.stop()
            raise
        local.install(self)
        return self

    def stop(self) -> None:
        """Stop the subworkers (tasks running are handed back) and the loop."""
        local.uninstall(self)
        if self._thread is None:
            return
        with contextlib.suppress(Exception):
            self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(self.wall_timeout)
        self._thread = None
        self._loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def _boot(self) -> None:
        loop = asyncio.get_running_loop()
        start = time.time() if self._start_time is None else self._start_time
        self._epoch = start - loop.time()
        assembly = Assembly(
            self._config, self.registry, instance_id=uuid.uuid4().hex, clock=self.clock, pace=_PACE
        )
        self._engine = assembly.engine
        endpoints = assembly.open()
        codec = self._codec
        self._submit = {
            priority: _responder(endpoint, codec)
            for priority, endpoint in endpoints.submission.items()
        }
        self._results = _responder(endpoints.results, codec)
        registrar = _responder(endpoints.registration, codec)
        self._upkeep = self._loop.create_task(assembly.upkeep())
        for number in range(1, self._worker_count + 1):
            worker = Subworker(
                SubworkerConfig(
                    concurrency=self._concurrency,
                    queues=self._queues,
                    fetch_wait=_PACE.max_fetch_wait,
                    name=f"test-cluster-{number}",
                ),
                self.registry,
                registration_address="in-process",
                worker_id=f"test-cluster-{number}",
                channel=_wires(registrar, codec, number),
            )
            self.workers.append(worker)
            self._watch(worker.run())
        await asyncio.gather(*(w.wait_ready() for w in self.workers))

    async def _shutdown(self) -> None:
        self._stopping = True  # the subworkers' drain need not take real time
        self._supervisor.stop()
        for worker in self.workers:
            worker.request_stop()
        running = [task for task in self._background if not task.done()]
        if running:
            await asyncio.wait(running, timeout=self.wall_timeout)
        if self._engine is not None:
            self._engine.close()
        everything = [*self._background, *([self._upkeep] if self._upkeep else [])]
        for task in everything:
            task.cancel()
        await asyncio.gather(*everything, return_exceptions=True)

    def _watch(self, work: Coroutine[Any, Any, None]) -> None:
        self._background.append(self._supervisor.spawn("a subworker", work))

    def _faulted(self, fault: Fault) -> None:
        if self._fault is None:
            self._fault = fault.error
            self._finish_goal(f"a part of the cluster died: {self._fault!r}")

    # --- the clock --------------------------------------------------------------------------

    def clock(self) -> float:
        """The cluster's time, in Unix seconds (what its control plane calls now)."""
        return self._epoch + self._loop.time()

    @property
    def now(self) -> float:
        return self.clock()

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` ahead, running everything that falls due on the way,
        and return once what is due has run (tasks still running on threads included)."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        self._reach(self._loop.time() + seconds, drain=False)

    def drain(self, max_seconds: float = 7 * 24 * 3600.0) -> None:
        """Run until no task is left to run: queued, running, delayed or retrying (the
        clock skips to each delayed task and retry), but no further than ``max_seconds``
        ahead (``ClusterError`` then). Periodic tasks not due yet do not count."""
        self._reach(self._loop.time() + max_seconds, drain=True)

    def _reach(self, until: float, *, drain: bool) -> None:
        self._check()
        if self._thread is None:
            raise ClusterError("the cluster is not started: use `with Cluster() as cluster:`")
        if threading.current_thread() is self._thread:
            raise ClusterError("advance() and drain() cannot be called from a task")
        goal = _Goal(until, drain, threading.Event())
        self._goal = goal
        self._loop.call_soon_threadsafe(_nothing)  # wake the loop if it waits
        if not goal.done.wait(self.wall_timeout):
            self._goal = None
            raise ClusterError(
                f"still busy after {self.wall_timeout:g} s of real time: tasks on threads "
                "or in child processes run in real time (raise wall_timeout)"
            )
        if goal.failure is not None:
            raise ClusterError(goal.failure)
        self._check()

    def _skip(self, wait: float | None) -> float | None:
        """On the loop, when it is idle: how far its clock may jump (see ``clock``)."""
        try:
            return self._skippable(wait)
        except Exception as exc:  # never into the loop: the cluster would hang
            self._fault = self._fault or exc
            self._finish_goal(f"the cluster's clock failed: {exc!r}")
            return None

    def _skippable(self, wait: float | None) -> float | None:
        # Idle, and no thread or child working: nothing can happen before the next timer,
        # so jumping to it is what waiting would do, only sooner.
        if self._engine is None or any(w.outside_loop for w in self.workers):
            return None
        goal, now = self._goal, self._loop.time()
        if goal is not None and not goal.drain:
            if now < goal.until:
                return goal.until - now if wait is None else min(wait, goal.until - now)
            if wait is not None and wait <= _SETTLE:
                return wait  # a hand-over in flight (an outcome on its way back)
            self._finish_goal(None)
        elif goal is not None:
            left = len(self._engine.view)
            stuck = self._stuck()
            if not left:
                self._finish_goal(None)
            elif stuck is not None:
                self._finish_goal(stuck)
                return None
            elif wait is None or now + wait > goal.until:
                self._finish_goal(f"{left} tasks still wait after skipping to the limit")
                return None
            else:
                return wait
        return wait if (self._held or self._stopping) and wait is not None else None

    def _finish_goal(self, failure: str | None) -> None:
        goal, self._goal = self._goal, None
        if goal is not None:
            goal.failure = failure
            goal.done.set()

    def _stuck(self) -> str | None:
        """Why the tasks left cannot run, if they cannot: all queued while every subworker
        waits for work (a queue none of them serves, a paused queue...), and no task is
        waiting for its time."""
        assert self._engine is not None
        view = self._engine.view
        if any(r.state != TaskState.QUEUED for r in view.live_records()):
            return None
        if view.next_limit_due(self.clock()) is not None:
            return None  # a rate limit lets them go in time
        fetching = self._engine.fetching
        if all(w.worker_id in fetching for w in self.workers if w.registered):
            return f"{len(view)} tasks are queued that no subworker here can take now"
        return None

    def _check(self) -> None:
        if self._fault is not None:
            raise ClusterError(f"a part of the cluster died: {self._fault!r}") from self._fault

    # --- what a test inspects -----------------------------------------------------------------

    @property
    def queued(self) -> list[TaskResult]:
        """Tasks not started yet: queued, delayed or waiting to be retried, oldest first."""
        return self._on_loop(lambda: self._tasks(_WAITING, final=False))

    @property
    def results(self) -> dict[str, TaskResult]:
        """Final results the control plane still keeps (until their time to live)."""
        found = self._on_loop(lambda: self._tasks((), final=True))
        return {r.task_id: r for r in found}

    def _tasks(self, states: tuple[TaskState, ...], *, final: bool) -> list[TaskResult]:
        assert self._engine is not None
        everything = self._engine.view.list_tasks(None, 1 << 30, self.clock())
        chosen = [r for r in everything if (r.status.is_final if final else r.status in states)]
        chosen.reverse()  # oldest first
        return chosen

    def client(self, **options: Any) -> SyncClient:
        """A started ``SyncClient`` of this cluster (any client started while the cluster
        runs is one; this saves the ``start()``)."""
        self._check()
        client = SyncClient(**options)
        client.start()
        return client

    # --- the backend clients talk to ------------------------------------------------------------

    async def answer(self, lane: local.Lane, data: bytes) -> bytes:
        if self._on_cluster_thread():
            return await self._answer(lane, data)
        running = asyncio.run_coroutine_threadsafe(self._answer(lane, data), self._loop)
        return await asyncio.wrap_future(running)

    def answer_blocking(self, lane: local.Lane, data: bytes, timeout: float) -> bytes:
        if self._on_cluster_thread():
            return _without_waiting(self._answer(lane, data))
        running = asyncio.run_coroutine_threadsafe(self._answer(lane, data), self._loop)
        try:
            return running.result(timeout)
        except TimeoutError:
            running.cancel()
            raise

    async def _answer(self, lane: local.Lane, data: bytes) -> bytes:
        responder = self._results if lane is None else self._submit[lane]
        assert responder is not None
        self._held += 1
        try:
            return await responder.reply_to(data, _CLIENTS)
        finally:
            self._held -= 1

    def _on_cluster_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _call(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the cluster's loop and wait for it (real time, bounded)."""
        running = asyncio.run_coroutine_threadsafe(work, self._loop)
        try:
            return running.result(self.wall_timeout)
        except concurrent.futures.TimeoutError:
            running.cancel()
            raise ClusterError(
                f"no answer from the cluster's loop in {self.wall_timeout:g} s"
            ) from None

    def _on_loop(self, read: Callable[[], T]) -> T:
        if self._on_cluster_thread():
            return read()

        async def reading() -> T:
            return read()

        return self._call(reading())


class _Wire:
    """A subworker's channel to the registration handler, on the cluster's loop."""

    connected = True

    def __init__(self, responder: Responder, codec: Codec, pipe_id: int) -> None:
        self._responder = responder
        self._codec = codec
        self._pipe_id = pipe_id

    async def request(self, message: Message, reply_type: type[M], timeout: float) -> M:
        data = self._codec.encode(message)
        try:
            reply_data = await asyncio.wait_for(
                self._responder.reply_to(data, self._pipe_id), timeout
            )
        except TimeoutError:
            raise Timeout(f"no reply from the test cluster within {timeout:g} s") from None
        try:
            reply = self._codec.decode(reply_data)
        except DecodeError as exc:  # pragma: no cover - the responder encodes what decodes
            raise AssertionError(f"the cluster sent an unreadable reply: {exc}") from exc
        if isinstance(reply, Error):
            raise rejection(reply.code, reply.message)
        assert isinstance(reply, reply_type), reply
        return reply

    def close(self) -> None:
        """Nothing to close."""


def _responder(endpoint: Endpoint, codec: Codec) -> Responder:
    return Responder(endpoint.name, codec, endpoint.handler, endpoint.serves)


def _wires(responder: Responder, codec: Codec, pipe_id: int) -> Callable[[str], _Wire]:
    """The channels of one subworker (a connection of its own)."""
    return lambda _address: _Wire(responder, codec, pipe_id)


def _nothing() -> None:
    """Scheduled from another thread only to wake the loop."""


def _without_waiting(work: Awaitable[bytes]) -> bytes:
    """The result of ``work`` run on the cluster's own thread (a blocking call from an
    async task in the cluster), which must finish without waiting for anything: the loop
    it would wait on is this thread."""
    step = work.__await__()
    try:
        step.send(None)
    except StopIteration as done:
        reply: bytes = done.value
        return reply
    step.close()
    raise ClusterError(
        "a blocking call that waits (SyncClient.wait, submit_task with a wait...) cannot be "
        "made from an async task in the test cluster: use the async Client there"
    )
