"""The blocking client, for scripts and WSGI apps (Django, Flask): every call goes from the
calling thread straight to NNG and back, with no event loop in between.

It builds the same messages and reads the same replies as the async
:class:`~fastworker.client.Client` (both use ``_calls``); only the I/O differs, done here
by ``_blocking``: blocking sends and receives on a pool of NNG contexts. Any number of
threads may share one ``SyncClient``.

Completion callbacks are the exception: they need something listening while the caller
does other things, so the first ``delay_with_callback`` (or use of :attr:`async_client`)
starts one background thread running the async client, which watches and calls back.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar, overload

from fastworker._admin_calls import SyncAdmin
from fastworker._blocking import announcement, successor
from fastworker._callbacks import Callback
from fastworker._calls import (
    DEFAULT_CONNECT_TIMEOUT,
    BatchItem,
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
from fastworker._operation_calls import SyncOperations
from fastworker._task import Task
from fastworker._workflows import SyncWorkflows
from fastworker.client import RESULTS, Client, _renamed
from fastworker.handles import TaskHandle
from fastworker.tracing import send_spans
from fastworker_common import local
from fastworker_common.blocking_channel import BlockingChannel
from fastworker_common.errors import ControlPlaneUnavailable, FastWorkerError, Timeout, unsendable
from fastworker_common.leader import SETTLE, Attempts, back_when, follows, rewait
from fastworker_common.sightings import Sightings
from fastworker_common.tls import TLS
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

M = TypeVar("M", bound=Message)
Channel = BlockingChannel | local.LocalBlockingChannel


P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("fastworker.client")


class SyncClient(SyncWorkflows, SyncOperations, SyncAdmin):
    """Blocking FastWorker client; same arguments and methods as :class:`Client` (a
    replicated control plane's leader is followed alike), and safe to share between
    threads."""

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
        """As :class:`Client`'s."""
        # The async client holds the settings (checked once, for both) and, once a
        # callback is asked for, watches tasks on the background thread.
        self._client = Client(
            discovery_address,
            timeout,
            retries,
            address=address,
            max_message_size=max_message_size,
            auth_token=auth_token,
            tls=tls,
            connect_timeout=connect_timeout,
        )
        self._settings = settings = self._client._settings
        self.discovery_address = settings.discovery_address
        self.timeout = settings.timeout
        self.retries = settings.retries
        self.connect_timeout = settings.connect_timeout
        self._lock = threading.Lock()
        self._announce: Announce | None = None
        self._sightings = Sightings()  # when each control plane last answered
        self._submit: dict[Priority, Channel] = {}
        self._results: Channel | None = None
        self._generation = 0  # of the channels: one more at every move to a new leader
        self._moving = threading.Lock()  # held by the one thread looking for a new leader
        self._moved_at = float("-inf")
        self._stopped = threading.Event()  # ends a look for a leader at once
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Find the control plane and connect to it; idempotent. Under
        ``fastworker.testing`` (``eager()``, a ``Cluster``) it connects to that instead."""
        with self._lock:
            if self._results is not None:
                return
            s = self._settings
            backend = local.installed()
            if backend is not None:
                self._open(lambda lane: local.LocalBlockingChannel(backend, lane, s.codec, s.auth))
                self._announce = None
                return
            if s.address is not None:
                announce = announce_from_base(s.address)
            else:
                announce = announcement(
                    s.discovery_address, s.codec, s.tls, s.timeout, s.connect_timeout
                )
            self._open(lambda lane: self._channel(lane_address(announce, lane), announce))
            self._announce = announce
            self._stopped.clear()

    def _move_to(self, announce: Announce) -> bool:
        """Leave the leader for its successor, which made ``announce`` (see
        ``Client._move_to``); ``False`` if stopped meanwhile."""
        with self._lock:
            if self._results is None:
                return False
            old = [*self._submit.values(), self._results]
            self._open(lambda lane: self._channel(lane_address(announce, lane), announce))
            self._announce, self._generation = announce, self._generation + 1
        for channel in old:
            channel.close()  # calls blocked on them end, and go again on the new ones
        log.info("following the new leader %s (epoch %d)", announce.results, announce.epoch)
        return True

    def _open(self, connect: Callable[[local.Lane], Channel]) -> None:
        self._submit = {p: connect(p) for p in Priority.by_rank()}
        self._results = connect(None)

    @property
    def started(self) -> bool:
        """Whether ``start`` has connected it (to a control plane, or a test backend)."""
        return self._results is not None

    def _channel(self, address: str, announce: Announce) -> BlockingChannel:
        s = self._settings
        unreachable, peer = s.unreachable(address, announce), s.peer(announce, self._sightings)
        return BlockingChannel(address, s.codec, s.auth, s.tls, unreachable=unreachable, peer=peer)

    def stop(self) -> None:
        """Close every socket (calls blocked on them raise ``ControlPlaneUnavailable``) and
        the callback thread, if one was started. Safe to call more than once."""
        self._stopped.set()
        with self._lock:
            channels = [*self._submit.values(), *([self._results] if self._results else [])]
            self._submit, self._results, self._announce = {}, None, None
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        for channel in channels:
            channel.close()
        if loop is not None and thread is not None:
            self._client.stop()
            loop.call_soon_threadsafe(loop.stop)
            if thread is not threading.current_thread():
                thread.join()
                loop.close()

    close = stop

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- submitting -----------------------------------------------------------------------

    @overload
    def delay(
        self, task: Task[P, Coroutine[Any, Any, R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> TaskHandle[R]: ...

    @overload
    def delay(self, task: Task[P, R], /, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]: ...

    @overload
    def delay(
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
    ) -> TaskHandle[Any]: ...

    def delay(self, task: TaskRef, /, *args: Any, **kwargs: Any) -> TaskHandle[Any]:
        """As :meth:`Client.delay`: queue a task and return its handle (its id:
        ``handle.get()`` waits for its value)."""
        options = delay_options(kwargs)
        return self.apply_async(task, args, kwargs, **options)

    def apply_async(
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
    ) -> TaskHandle[Any]:
        """As :meth:`Client.apply_async`: queue a task and return its handle."""
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
        with send_spans([spec], lane) as traced:
            reply = self._request(lane, Submit(tasks=traced), Accepted)
        return TaskHandle(reply.task_ids[0], self)

    def handle(self, task_id: str) -> TaskHandle[Any]:
        """A handle of a task queued before (by any client), from its id."""
        return TaskHandle(task_id, self)

    def delay_with_callback(
        self,
        task: TaskRef,
        callback: Callback,
        *args: Any,
        priority: Priority | str | None = None,
        **kwargs: Any,
    ) -> TaskHandle[Any]:
        """As :meth:`Client.delay_with_callback`; the callback runs on this client's
        background thread."""
        handle = self.apply_async(task, args, kwargs, priority=priority)
        self.watch(handle, callback)
        return handle

    def watch(self, task_id: str, callback: Callback | None = None) -> None:
        """As :meth:`Client.watch`: ``callback`` gets the task's final result, on this
        client's background thread (without one, the result goes to the ``events()`` of
        :attr:`async_client`)."""
        client, loop = self._background()
        loop.call_soon_threadsafe(client.watch, task_id, callback)

    def submit_task(
        self,
        task_name: TaskRef,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        priority: Priority | str | None = None,
        timeout: float | None = None,
        queue: str | None = None,
    ) -> TaskResult:
        """As :meth:`Client.submit_task`: queue a task and wait for its final result."""
        wait = self.timeout if timeout is None else timeout
        lane = priority_of(task_name, priority)
        started = time.monotonic()
        with send_spans([task_spec(task_name, args, kwargs, queue=queue)], lane) as (spec,):
            message = Submit(tasks=[spec], wait=wait)
            reply = self._request(lane, message, Results, wait)
        self._client._known.remember(reply.results)
        [result] = reply.results
        if (left := left_to_wait(result, wait, started, time.monotonic())) is not None:
            [result] = self._get([spec.id], left)
        return final(spec.id, result, wait)

    def submit_batch(
        self, items: Iterable[BatchItem | Mapping[str, Any] | tuple[Any, ...]]
    ) -> list[str]:
        """As :meth:`Client.submit_batch` (the messages are sent one after the other)."""
        ids, chunks = batch_specs(list(items))
        for priority, specs in chunks:
            self._send_chunk(priority, specs)
        return ids

    def _send_chunk(self, priority: Priority, specs: list[TaskSpec]) -> None:
        with send_spans(specs, priority) as traced:
            self._request(priority, Submit(tasks=traced), Accepted)

    # --- results ----------------------------------------------------------------------------

    def get_task_result(self, task_id: str) -> TaskResult | None:
        """What the control plane knows of the task now; ``None`` if unknown or expired."""
        return self._get([task_id], None)[0]

    def wait_result(self, task_id: str, timeout: float | None = None) -> TaskResult:
        """Wait until the task is final and return its result (any status)."""
        wait = self.timeout if timeout is None else timeout
        return final(task_id, self._get([task_id], wait)[0], wait)

    def wait_results(
        self, task_ids: Sequence[str], timeout: float | None = None
    ) -> list[TaskResult]:
        """As :meth:`Client.wait_results`; one deadline for all (messages of 1,000 ids are
        waited for one after the other, each for what is left of it)."""
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        results: list[TaskResult] = []
        for chunk in id_chunks(task_ids):
            got = self._get(chunk, max(0.0, deadline - time.monotonic()))
            results.extend(final(i, r, wait) for i, r in zip(chunk, got, strict=True))
        return results

    def wait(self, task_id: str, timeout: float | None = None) -> Any:
        """Wait for the task and return its value; raise ``TaskFailed`` / ``TaskCancelled``."""
        return unwrap(self.wait_result(task_id, timeout))

    def _get(self, task_ids: list[str], wait: float | None) -> list[TaskResult | None]:
        """As the async client's: asks again when a held wait ends before ``wait``."""
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            asked = time.monotonic()
            left = None if deadline is None else max(0.0, deadline - asked)
            message = Get(task_ids=task_ids, wait=left)
            reply = self._request(RESULTS, message, Results, left)
            self._client._known.remember(reply.results)
            pause = pause_before_getting_again(reply.results, deadline, asked, time.monotonic())
            if pause is None:
                return reply.results
            time.sleep(pause)

    def last_seen_result(self, task_id: str) -> TaskResult | None:
        """As :meth:`Client.last_seen_result` (no network call)."""
        return self._client.last_seen_result(task_id)

    def last_seen_status(self, task_id: str) -> TaskState | None:
        """As :meth:`Client.last_seen_status` (no network call)."""
        return self._client.last_seen_status(task_id)

    def get_result(self, task_id: str) -> TaskResult | None:
        """Deprecated: the older name of :meth:`last_seen_result`, which asks no one."""
        _renamed("get_result", "last_seen_result", "info")
        return self.last_seen_result(task_id)

    def get_status(self, task_id: str) -> TaskState | None:
        """Deprecated: the older name of :meth:`last_seen_status`, which asks no one."""
        _renamed("get_status", "last_seen_status", "status")
        return self.last_seen_status(task_id)

    def cancel_task(self, task_id: str) -> bool:
        """Cancel a task that has not finished; ``False`` if it already had."""
        reply = self._request(RESULTS, Cancel(task_id=task_id), Cancelled)
        return reply.changed

    # --- callbacks --------------------------------------------------------------------------

    @property
    def async_client(self) -> Client:
        """The async :class:`Client` on this client's background thread (started on first
        use), for async callbacks, which run there."""
        return self._background()[0]

    def _background(self) -> tuple[Client, asyncio.AbstractEventLoop]:
        """The async client watching for callbacks, and the loop of its thread; both
        started on first use, connected to the control plane this client found."""
        with self._lock:
            if self._results is None:
                raise _not_started()
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="fastworker-callbacks", daemon=True
                )
                thread.start()
                opening = _open(self._client, self._announce)
                asyncio.run_coroutine_threadsafe(opening, loop).result()
                self._loop, self._thread = loop, thread
            return self._client, self._loop

    # --- plumbing ---------------------------------------------------------------------------

    def _request(
        self,
        lane: local.Lane,
        message: Message,
        reply_type: type[M],
        wait: float | None = None,
    ) -> M:
        # As the async client's: one deadline, and a look for the next leader within it.
        attempts = Attempts(self._settings.budget(wait), time.monotonic())
        generation, channel = self._generation, self._lane(lane)
        sent, connect_timeout = message, self._settings.connect_timeout
        while True:
            timeout = attempts.timeout(time.monotonic())
            try:
                return channel.request(sent, reply_type, timeout, connect_timeout)
            except EncodeError as exc:  # nothing was sent
                raise unsendable(exc) from exc
            except (Timeout, ControlPlaneUnavailable) as exc:
                if self._moved(generation, attempts, back_when(exc, channel)):
                    generation, channel = self._generation, self._lane(lane)
                    sent = rewait(message, wait, time.monotonic() - attempts.started)
                    continue
                following = follows(self._announce, self._settings.address)
                if not attempts.again(time.monotonic(), channel.connected, following):
                    raise

    def _moved(self, generation: int, attempts: Attempts, back: Callable[[], bool] | None) -> bool:
        """Whether this client left the leader it had at ``generation`` for a successor:
        already, or within the look a failed attempt allows, which ends once ``back()``.
        One thread looks; the others wait for it (each no longer than its own look), then
        see the move or look next."""
        until = attempts.look_until(time.monotonic())
        if self._generation == generation and not follows(self._announce, self._settings.address):
            return False
        if not self._moving.acquire(timeout=max(0.0, until - time.monotonic())):
            return self._generation != generation
        try:
            current, left = self._announce, until - time.monotonic()
            if self._generation != generation or current is None or left <= 0:
                return self._generation != generation
            if back is not None and back():
                return False
            # Two "leaders" must not bounce a call to and fro: not faster than SETTLE.
            if self._stopped.wait(self._moved_at + SETTLE - time.monotonic()):
                return False
            s, left = self._settings, until - time.monotonic()

            def stop() -> bool:
                return self._stopped.is_set() or (back is not None and back())

            heard = successor(s.discovery_address, s.codec, s.tls, current, left, stop)
            if heard is None or not self._move_to(heard):
                return False
            self._moved_at = time.monotonic()
            return True
        finally:
            self._moving.release()

    def _lane(self, lane: local.Lane) -> Channel:
        """The channel of a submission priority, or of results (``RESULTS``)."""
        channel = self._results if lane is None else self._submit.get(lane)
        if channel is None:
            raise _not_started()
        return channel


async def _open(client: Client, announce: Announce | None) -> None:
    """Connect the callback thread's client where this one is (``None``: in-process)."""
    if announce is None:
        await client.start()
    else:
        client._connect_to(announce)


def _not_started() -> FastWorkerError:
    return FastWorkerError("SyncClient is not started: call start() or use `with`")
