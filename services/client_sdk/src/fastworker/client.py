"""The async client: submit tasks, wait for and read their results, cancel them.

It finds the control plane by discovery (or takes an explicit submission address) and
keeps one REQ channel per priority port plus one for results. Any number of calls may be
in flight at once; each is a separate NNG context.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar, overload

from fastworker._admin_calls import AsyncAdmin
from fastworker._callbacks import Callback, CompletionWatcher
from fastworker._calls import (
    DEFAULT_CONNECT_TIMEOUT,
    BatchItem,
    KnownResults,
    Settings,
    TaskPage,
    TaskRef,
    announce_from_base,
    batch_specs,
    delay_options,
    eta_of,
    final,
    id_chunks,
    lane_address,
    left_to_wait,
    pause_before_getting_again,
    priority_of,
    task_spec,
    unwrap,
)
from fastworker._coalescer import SendBatch, SubmitCoalescer
from fastworker._operation_calls import AsyncOperations
from fastworker._task import Task
from fastworker._workflows import AsyncWorkflows
from fastworker.handles import AsyncTaskHandle
from fastworker.tls import TLS
from fastworker.tracing import send_spans
from fastworker_common import local
from fastworker_common.discovery import DiscoveryPeer, LeaderSearch
from fastworker_common.errors import ControlPlaneUnavailable, FastWorkerError, Timeout, unsendable
from fastworker_common.leader import Attempts, back_when, follows, rewait
from fastworker_common.sightings import Sightings
from fastworker_common.transport import RequestChannel
from fastworker_protocol import (
    DEFAULT_MAX_MESSAGE_SIZE,
    Accepted,
    Announce,
    Cancel,
    Cancelled,
    EncodeError,
    Get,
    Message,
    Priority,
    Results,
    Submit,
    TaskResult,
    TaskSpec,
    TaskState,
)

__all__ = ["BatchItem", "Client", "TaskPage", "TaskRef", "announce_from_base", "unwrap"]

M = TypeVar("M", bound=Message)


Channel = RequestChannel | local.LocalChannel
P = ParamSpec("P")
R = TypeVar("R")
RESULTS: local.Lane = None  # the results channel's lane (the others are priorities)

log = logging.getLogger("fastworker.client")


LOOK_AFTER = 1.0  # seconds a followed leader may take to answer before a successor is sought


class Client(AsyncWorkflows, AsyncOperations, AsyncAdmin):
    """Async FastWorker client.

    ``timeout`` is one deadline for each call, retries included (and the default wait of
    ``submit_task``); a call that waits for a result ends within its wait plus at most
    ``min(timeout, 5)`` s more. ``retries`` is how many times a call that got no reply is
    re-sent within that deadline. Re-sending is safe: a task keeps its id across retries
    and the control plane accepts each id once. ``connect_timeout`` (default 3 s) is how
    long finding and connecting to the control plane may take: with nothing there, ``start``
    and every call raise ``ControlPlaneUnavailable`` that soon, naming the address tried.

    Workflows (``submit_workflow``, ``wait_workflow``...) come from ``AsyncWorkflows``;
    dead letters (``list_failed``, ``retry_failed``...) and schedules made at run time
    (``add_schedule``, ``remove_schedule``) from ``AsyncOperations``.

    Replicated control planes (one leader, followers) are followed: give every replica's
    discovery address, comma-separated, and a call that loses the leader (no connection, no
    reply, or ``unavailable``) waits within its ``timeout`` for the next leader to announce
    itself, then sends the same request there (same task ids: nothing runs twice).
    """

    def __init__(
        self,
        discovery_address: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        *,
        address: str | None = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        auth_token: str | None = None,
        tls: TLS | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        """``discovery_address`` is where control planes announce themselves, or a
        comma-separated list of such addresses, one per replica (default: the
        ``FASTWORKER_DISCOVERY_ADDRESS`` environment variable, else
        ``tcp://127.0.0.1:5550``); ``auth_token`` is the control plane's shared token, if
        it requires one (default: the ``FASTWORKER_AUTH_TOKEN`` environment variable); ``tls`` holds
        the CA (and, for mutual TLS, this client's certificate) for ``tls+tcp://``
        addresses (default: the ``FASTWORKER_TLS_*`` variables)."""
        self._settings = settings = Settings.of(
            discovery_address,
            timeout,
            retries,
            address=address,
            max_message_size=max_message_size,
            auth_token=auth_token,
            tls=tls,
            connect_timeout=connect_timeout,
        )
        self.discovery_address = settings.discovery_address
        self.timeout = settings.timeout
        self.retries = settings.retries
        self.connect_timeout = settings.connect_timeout
        self._submit: dict[Priority, Channel] = {}
        self._coalescers: dict[Priority, SubmitCoalescer] = {}
        self._watcher: CompletionWatcher | None = None
        self._results: Channel | None = None
        self._known = KnownResults()
        self._sightings = Sightings()  # when each control plane last answered
        self._announce: Announce | None = None  # whose channels these are (None: in-process)
        self._generation = 0  # of the channels: one more at every move to a new leader
        self._search: LeaderSearch | None = None

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Find the control plane and connect to it; idempotent. Under
        ``fastworker.testing`` (``eager()``, a ``Cluster``) it connects to that instead."""
        if self._results is not None:
            return
        backend = local.installed()
        if backend is not None:
            s = self._settings
            self._open(lambda lane: local.LocalChannel(backend, lane, s.codec, s.auth))
            return
        self._connect_to(await self._locate())

    def _connect_to(self, announce: Announce) -> None:
        """Connect to the control plane that made ``announce``."""
        self._open(lambda lane: self._channel(lane_address(announce, lane), announce))
        self._announce = announce
        if self._settings.address is None:
            s = self._settings
            self._search = LeaderSearch(s.discovery_address, s.codec, s.tls, self._move_to)

    def _move_to(self, announce: Announce) -> bool:
        """Leave the leader for its successor, which made ``announce``: new channels (calls
        on the old ones end, and go again on these), same coalescers and watches."""
        if self._results is None:  # stopped meanwhile
            return False
        old = [*self._submit.values(), self._results]
        self._connect_channels(lambda lane: self._channel(lane_address(announce, lane), announce))
        self._announce, self._generation = announce, self._generation + 1
        for channel in old:
            channel.close()
        log.info("following the new leader %s (epoch %d)", announce.results, announce.epoch)
        return True

    def _open(self, connect: Callable[[local.Lane], Channel]) -> None:
        """Open a channel per submission priority and one for results."""
        self._connect_channels(connect)
        self._coalescers = {p: SubmitCoalescer(self._batch_sender(p)) for p in self._submit}
        self._watcher = CompletionWatcher(self._get_any)

    def _connect_channels(self, connect: Callable[[local.Lane], Channel]) -> None:
        self._submit = {p: connect(p) for p in Priority.by_rank()}
        self._results = connect(RESULTS)

    async def _locate(self) -> Announce:
        settings = self._settings
        if settings.address is not None:
            return announce_from_base(settings.address)
        peer = DiscoveryPeer(settings.discovery_address, settings.codec, tls=settings.tls)
        try:
            return await peer.announcement(self.timeout, self.connect_timeout)
        finally:
            await peer.aclose()

    def _channel(self, address: str, announce: Announce) -> RequestChannel:
        s = self._settings
        unreachable, peer = s.unreachable(address, announce), s.peer(announce, self._sightings)
        return RequestChannel(
            address,
            s.codec,
            s.auth,
            s.tls,
            unreachable=unreachable,
            peer=peer,
            on_lost=lambda: self._look_for_successor(announce),
        )

    def _look_for_successor(self, announce: Announce) -> None:
        """The leader that made ``announce`` may be gone (its connection dropped, or a call
        got no reply within ``LOOK_AFTER``): if this client follows it, look for a
        successor now, not when a call times out (calls in flight move with the client,
        see ``_move_to``)."""
        search, address = self._search, self._settings.address
        if search is not None and announce is self._announce and follows(announce, address):
            search.look(announce, asyncio.get_running_loop().time() + self.connect_timeout)

    @property
    def started(self) -> bool:
        """Whether ``start`` has connected it (to a control plane, or a test backend)."""
        return self._results is not None

    def stop(self) -> None:
        """Close every socket. Safe to call more than once, and without ``await``."""
        for channel in self._submit.values():
            channel.close()
        if self._results is not None:
            self._results.close()
        if self._watcher is not None:
            self._watcher.close()
        if self._search is not None:
            self._search.close()
        self._submit, self._coalescers, self._watcher = {}, {}, None
        self._results, self._announce, self._search = None, None, None

    async def aclose(self) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- submitting -----------------------------------------------------------------------

    @overload
    async def delay(
        self, task: Task[P, Coroutine[Any, Any, R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> AsyncTaskHandle[R]: ...

    @overload
    async def delay(
        self, task: Task[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> AsyncTaskHandle[R]: ...

    @overload
    async def delay(
        self,
        task: str,
        /,
        *args: Any,
        priority: Priority | str | None = None,
        countdown: float | None = None,
        eta: datetime | float | None = None,
        idempotency_key: str | None = None,
        queue: str | None = None,
        **kwargs: Any,
    ) -> AsyncTaskHandle[Any]: ...

    async def delay(self, task: TaskRef, /, *args: Any, **kwargs: Any) -> AsyncTaskHandle[Any]:
        """Queue a task and return its handle (its id: ``await handle`` is its value)
        without waiting for it to run.

        ``countdown`` (seconds from now) or ``eta`` (a datetime, or Unix seconds) delay it.
        With ``idempotency_key``, a second call with the same key (and task) returns the
        first call's task id instead of queueing again, for as long as that task is live or
        its result is kept. ``queue`` sends it to that named queue instead of the task's
        own. ``priority``, ``countdown``, ``eta``, ``idempotency_key`` and ``queue`` are
        therefore not passed to the task.
        """
        options = delay_options(kwargs)
        return await self.apply_async(task, args, kwargs, **options)

    async def apply_async(
        self,
        task: TaskRef,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        priority: Priority | str | None = None,
        task_id: str | None = None,
        countdown: float | None = None,
        eta: datetime | float | None = None,
        max_retries: int | None = None,
        time_limit: float | None = None,
        idempotency_key: str | None = None,
        queue: str | None = None,
    ) -> AsyncTaskHandle[Any]:
        """Queue a task and return its handle; ``task_id`` or ``idempotency_key`` makes
        the call idempotent across your own retries, ``countdown``/``eta`` delay it,
        ``max_retries`` and ``time_limit`` (seconds an attempt may run) override the
        task's own settings."""
        self._require_started()
        spec = task_spec(
            task,
            args,
            kwargs,
            task_id,
            eta=eta_of(countdown, eta),
            max_retries=max_retries,
            time_limit=time_limit,
            idempotency_key=idempotency_key,
            queue=queue,
        )
        lane = priority_of(task, priority)
        with send_spans([spec], lane) as (traced,):
            return AsyncTaskHandle(await self._coalescers[lane].submit(traced), self)

    def handle(self, task_id: str) -> AsyncTaskHandle[Any]:
        """A handle of a task queued before (by any client), from its id."""
        return AsyncTaskHandle(task_id, self)

    async def delay_with_callback(
        self,
        task: TaskRef,
        callback: Callback,
        *args: Any,
        priority: Priority | str | None = None,
        **kwargs: Any,
    ) -> AsyncTaskHandle[Any]:
        """Queue a task; ``callback`` (sync or async) gets its final ``TaskResult`` when it
        ends, without polling. A callback that raises is logged; the others still run."""
        handle = await self.apply_async(task, args, kwargs, priority=priority)
        self.watch(handle, callback)
        return handle

    def watch(self, task_id: str, callback: Callback | None = None) -> None:
        """Follow a task: ``callback`` gets its final result, and so does :meth:`events`."""
        self._require_started()
        assert self._watcher is not None
        self._watcher.watch(task_id, callback)

    async def events(self) -> AsyncIterator[TaskResult]:
        """The final results of the tasks this client watches, as they end.

        They wait for a reader in a buffer of the latest 1,000: past that the oldest are
        dropped and counted in :attr:`events_dropped`. Callbacks never miss a result."""
        self._require_started()
        assert self._watcher is not None
        async for result in self._watcher.events():
            yield result

    @property
    def events_dropped(self) -> int:
        """Results :meth:`events` dropped, unread, from its full buffer (since ``start``)."""
        return 0 if self._watcher is None else self._watcher.events_dropped

    async def _get_any(self, task_ids: list[str], wait: float) -> list[TaskResult | None]:
        message = Get(task_ids=task_ids, wait=wait, any=True)
        reply = await self._request(RESULTS, message, Results, wait)
        self._known.remember(reply.results)
        return reply.results

    async def submit_task(
        self,
        task_name: TaskRef,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        priority: Priority | str | None = None,
        timeout: float | None = None,
        queue: str | None = None,
    ) -> TaskResult:
        """Queue a task and wait up to ``timeout`` seconds for its final result.

        Returns the result whatever its status (success, failure, cancelled); raises
        :class:`Timeout` if it is not final in time.
        """
        wait = self.timeout if timeout is None else timeout
        lane = priority_of(task_name, priority)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with send_spans([task_spec(task_name, args, kwargs, queue=queue)], lane) as (spec,):
            reply = await self._send_submit(lane, [spec], wait, Results)
        [result] = reply.results
        if (left := left_to_wait(result, wait, started, loop.time())) is not None:
            [result] = await self._get([spec.id], left)
        return final(spec.id, result, wait)

    async def submit_batch(
        self, items: Iterable[BatchItem | Mapping[str, Any] | tuple[Any, ...]]
    ) -> list[str]:
        """Queue many tasks, in messages of up to 1,000 per priority; ids in input order.

        Each message is accepted or rejected as a whole; if one is rejected its error is
        raised, and messages sent alongside it may already have been accepted.
        """
        ids, chunks = batch_specs(list(items))
        await asyncio.gather(*(self._send_chunk(p, specs) for p, specs in chunks))
        return ids

    async def _send_chunk(self, priority: Priority, specs: list[TaskSpec]) -> None:
        with send_spans(specs, priority) as traced:
            await self._send_submit(priority, traced, None, Accepted)

    def _batch_sender(self, priority: Priority) -> SendBatch:
        async def send(specs: list[TaskSpec]) -> Accepted:
            message = Submit(tasks=specs, atomic=False)
            return await self._request(priority, message, Accepted, None)

        return send

    async def _send_submit(
        self,
        priority: Priority,
        specs: list[TaskSpec],
        wait: float | None,
        reply_type: type[M],
    ) -> M:
        self._require_started()
        message = Submit(tasks=specs, wait=wait)
        reply = await self._request(priority, message, reply_type, wait)
        if isinstance(reply, Results):
            self._known.remember(reply.results)
        return reply

    # --- results ----------------------------------------------------------------------------

    async def get_task_result(self, task_id: str) -> TaskResult | None:
        """What the control plane knows of the task now; ``None`` if unknown or expired."""
        results = await self._get([task_id], None)
        return results[0]

    async def wait_result(self, task_id: str, timeout: float | None = None) -> TaskResult:
        """Wait until the task is final and return its result (any status)."""
        wait = self.timeout if timeout is None else timeout
        results = await self._get([task_id], wait)
        return final(task_id, results[0], wait)

    async def wait_results(
        self, task_ids: Sequence[str], timeout: float | None = None
    ) -> list[TaskResult]:
        """Wait until every task is final and return their results, in order (asked in
        messages of 1,000 ids, all at once). Raises ``Timeout`` if any is not final in
        time, ``TaskNotFound`` if any is unknown or expired."""
        wait = self.timeout if timeout is None else timeout
        chunks = id_chunks(task_ids)
        replies = await asyncio.gather(*(self._get(chunk, wait) for chunk in chunks))
        return [
            final(task_id, result, wait)
            for chunk, results in zip(chunks, replies, strict=True)
            for task_id, result in zip(chunk, results, strict=True)
        ]

    async def wait(self, task_id: str, timeout: float | None = None) -> Any:
        """Wait for the task and return its value; raise ``TaskFailed`` / ``TaskCancelled``."""
        return unwrap(await self.wait_result(task_id, timeout))

    async def _get(self, task_ids: list[str], wait: float | None) -> list[TaskResult | None]:
        """The tasks' results; with ``wait``, once all are final or ``wait`` has passed,
        asking again when the control plane let go sooner (it holds a wait for at most
        its ``--max-wait``)."""
        loop = asyncio.get_running_loop()
        deadline = None if wait is None else loop.time() + wait
        while True:
            asked = loop.time()
            left = None if deadline is None else max(0.0, deadline - asked)
            message = Get(task_ids=task_ids, wait=left)
            reply = await self._request(RESULTS, message, Results, left)
            self._known.remember(reply.results)
            pause = pause_before_getting_again(reply.results, deadline, asked, loop.time())
            if pause is None:
                return reply.results
            await asyncio.sleep(pause)

    def last_seen_result(self, task_id: str) -> TaskResult | None:
        """The last result of the task this client happened to receive (no network
        call; ``None`` for one it never heard of). To ask the control plane:
        ``handle.info()`` or :meth:`get_task_result`."""
        return self._known.get(task_id)

    def last_seen_status(self, task_id: str) -> TaskState | None:
        """The status in :meth:`last_seen_result` (no network call). To ask the control
        plane: ``handle.status()``."""
        known = self._known.get(task_id)
        return known.status if known else None

    def get_result(self, task_id: str) -> TaskResult | None:
        """Deprecated: the older name of :meth:`last_seen_result`, which asks no one."""
        _renamed("get_result", "last_seen_result", "info")
        return self.last_seen_result(task_id)

    def get_status(self, task_id: str) -> TaskState | None:
        """Deprecated: the older name of :meth:`last_seen_status`, which asks no one."""
        _renamed("get_status", "last_seen_status", "status")
        return self.last_seen_status(task_id)

    async def cancel_task(self, task_id: str) -> bool:
        """Cancel a task that has not finished; ``False`` if it already had."""
        reply = await self._request(RESULTS, Cancel(task_id=task_id), Cancelled, None)
        return reply.changed

    # --- plumbing ---------------------------------------------------------------------------

    async def _request(
        self, lane: local.Lane, message: Message, reply_type: type[M], wait: float | None
    ) -> M:
        # One deadline for the call, shared by its attempts (see Budget), and within it a
        # look for the next leader when a replicated one is lost (see _leader.Attempts).
        loop = asyncio.get_running_loop()
        attempts = Attempts(self._settings.budget(wait), loop.time())
        channel, generation, sent = self._lane(lane), self._generation, message
        while True:
            timeout = attempts.timeout(loop.time())
            slow = self._look_if_slow(wait)
            try:
                return await channel.request(sent, reply_type, timeout, self.connect_timeout)
            except EncodeError as exc:  # nothing was sent
                raise unsendable(exc) from exc
            except (Timeout, ControlPlaneUnavailable) as exc:
                if await self._moved(generation, attempts, back_when(exc, channel)):
                    channel, generation = self._lane(lane), self._generation
                    sent = rewait(message, wait, loop.time() - attempts.started)
                    continue
                following = follows(self._announce, self._settings.address)
                if not attempts.again(loop.time(), channel.connected, following):
                    raise
            finally:
                if slow is not None:
                    slow.cancel()

    def _look_if_slow(self, wait: float | None) -> asyncio.TimerHandle | None:
        """A request to a followed leader that is not held (no ``wait``) and gets no reply
        within ``LOOK_AFTER`` looks for a successor meanwhile: a paused or cut-off leader
        keeps its connections, so nothing else says it is gone before the call's slot ends."""
        announce = self._announce
        if wait is not None or announce is None or not follows(announce, self._settings.address):
            return None
        loop = asyncio.get_running_loop()
        return loop.call_later(LOOK_AFTER, self._look_for_successor, announce)

    async def _moved(
        self, generation: int, attempts: Attempts, back: Callable[[], bool] | None
    ) -> bool:
        """Whether this client left the leader it had at ``generation`` for a successor:
        already, or within the look a failed attempt allows (one look, shared by calls;
        this call's ends once ``back()``)."""
        if self._generation != generation:
            return True
        current, search = self._announce, self._search
        if search is None or current is None or not follows(current, self._settings.address):
            return False
        until = attempts.look_until(asyncio.get_running_loop().time())
        return await search.successor(current, until, back)

    def _lane(self, lane: local.Lane) -> Channel:
        """The channel of a submission priority, or of results (``RESULTS``)."""
        self._require_started()
        if lane is not None:
            return self._submit[lane]
        assert self._results is not None
        return self._results

    def _require_started(self) -> None:
        if self._results is None:
            raise FastWorkerError(
                "client is not started: use `await client.start()` "
                "or `async with Client() as client`"
            )


def _renamed(old: str, new: str, handle_method: str) -> None:
    warnings.warn(
        f"client.{old}() is deprecated: it never asked the control plane, only read what "
        f"this client had seen; call client.{new}() for that, or handle.{handle_method}() "
        "to ask the control plane",
        DeprecationWarning,
        stacklevel=3,
    )
