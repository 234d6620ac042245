"""The async client: submit tasks, wait for and read their results, cancel them.

It finds the control plane by discovery (or takes an explicit submission address) and
keeps one REQ channel per priority port plus one for results. Any number of calls may be
in flight at once; each is a separate NNG context.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self, TypeVar

from fastworker._callbacks import Callback, CompletionWatcher
from fastworker._coalescer import SendBatch, SubmitCoalescer
from fastworker._discovery import DiscoveryPeer
from fastworker._task import Task
from fastworker._transport import RequestChannel
from fastworker.errors import (
    ControlPlaneUnavailable,
    FastWorkerError,
    InvalidArguments,
    TaskCancelled,
    TaskFailed,
    TaskNotFound,
    Timeout,
    unreachable_announced,
    unsendable,
)
from fastworker.tls import TLS
from fastworker.tracing import send_spans
from fastworker_protocol import (
    DEFAULT_DISCOVERY_ADDRESS,
    DEFAULT_MAX_MESSAGE_SIZE,
    Accepted,
    Announce,
    Cancel,
    Cancelled,
    Codec,
    EncodeError,
    Get,
    ListSchedules,
    ListTasks,
    ListWorkers,
    Message,
    PortMap,
    Priority,
    Results,
    ScheduleInfo,
    ScheduleList,
    Submit,
    TaskList,
    TaskResult,
    TaskSpec,
    TaskState,
    WorkerInfo,
    WorkerList,
    check_portable,
    tcp_address,
)

TaskRef = str | Task[..., Any]
M = TypeVar("M", bound=Message)
BATCH_CHUNK = 1000
DEFAULT_CONNECT_TIMEOUT = 3.0
_REPLY_GRACE = 5.0  # seconds a held wait allows past its wait for the reply to arrive
_KNOWN_RESULTS = 10_000


@dataclass(frozen=True)
class BatchItem:
    """One task of a ``submit_batch`` call."""

    task_name: str
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    priority: Priority | str | None = None


class TaskPage(list[TaskResult]):
    """What ``list_tasks`` returns: the tasks, most recent first, and ``more``: whether
    matching tasks within the limit were left out because they did not fit one reply
    (ask for fewer, or by status). A listed task whose result was too large to list has
    ``truncated`` set; ``wait_result``/``get_task_result`` return it whole."""

    more: bool = False


class Client:
    """Async FastWorker client.

    ``timeout`` is one deadline for each call, retries included (and the default wait of
    ``submit_task``); a call that waits for a result ends within its wait plus at most
    ``min(timeout, 5)`` s more. ``retries`` is how many times a call that got no reply is
    re-sent within that deadline. Re-sending is safe: a task keeps its id across retries
    and the control plane accepts each id once. ``connect_timeout`` (default 3 s) is how
    long finding and connecting to the control plane may take: with nothing there, ``start``
    and every call raise ``ControlPlaneUnavailable`` that soon, naming the address tried.
    """

    def __init__(
        self,
        discovery_address: str = DEFAULT_DISCOVERY_ADDRESS,
        timeout: float = 30.0,
        retries: int = 3,
        *,
        address: str | None = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        auth_token: str | None = None,
        tls: TLS | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        """``auth_token`` is the control plane's shared token, if it requires one
        (default: the ``FASTWORKER_AUTH_TOKEN`` environment variable); ``tls`` holds
        the CA (and, for mutual TLS, this client's certificate) for ``tls+tcp://``
        addresses (default: the ``FASTWORKER_TLS_*`` variables)."""
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        if connect_timeout <= 0:
            raise ValueError("connect_timeout must be positive")
        self.discovery_address = discovery_address
        self.timeout = timeout
        self.retries = retries
        self.connect_timeout = min(connect_timeout, timeout)
        self._explicit_address = address
        self._codec = Codec(max_message_size)
        self._auth = auth_token or os.environ.get("FASTWORKER_AUTH_TOKEN") or None
        self._tls = tls or TLS.from_env()
        self._submit: dict[Priority, RequestChannel] = {}
        self._coalescers: dict[Priority, SubmitCoalescer] = {}
        self._watcher: CompletionWatcher | None = None
        self._results: RequestChannel | None = None
        self._known: OrderedDict[str, TaskResult] = OrderedDict()

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Find the control plane and connect to it; idempotent."""
        if self._results is not None:
            return
        announce = await self._locate()
        self._submit = {
            p: self._channel(addr, announce)
            for p, addr in zip(Priority.by_rank(), announce.submit, strict=True)
        }
        self._results = self._channel(announce.results, announce)
        self._coalescers = {p: SubmitCoalescer(self._batch_sender(p)) for p in self._submit}
        self._watcher = CompletionWatcher(self._get_any)

    async def _locate(self) -> Announce:
        if self._explicit_address is not None:
            return announce_from_base(self._explicit_address)
        peer = DiscoveryPeer(self.discovery_address, self._codec, tls=self._tls)
        try:
            return await peer.announcement(self.timeout, self.connect_timeout)
        finally:
            await peer.aclose()

    def _channel(self, address: str, announce: Announce) -> RequestChannel:
        unreachable = None
        if self._explicit_address is None:  # the address came from an announcement
            unreachable = unreachable_announced(address, announce.submit[0], self.discovery_address)
        return RequestChannel(address, self._codec, self._auth, self._tls, unreachable=unreachable)

    def stop(self) -> None:
        """Close every socket. Safe to call more than once, and without ``await``."""
        for channel in self._submit.values():
            channel.close()
        if self._results is not None:
            self._results.close()
        if self._watcher is not None:
            self._watcher.close()
        self._submit, self._coalescers, self._watcher = {}, {}, None
        self._results = None

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

    async def delay(
        self,
        task: TaskRef,
        *args: Any,
        priority: Priority | str | None = None,
        countdown: float | None = None,
        eta: datetime | float | None = None,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> str:
        """Queue a task and return its id without waiting for it to run.

        ``countdown`` (seconds from now) or ``eta`` (a datetime, or Unix seconds) delay it.
        With ``idempotency_key``, a second call with the same key (and task) returns the
        first call's task id instead of queueing again, for as long as that task is live or
        its result is kept. ``priority``, ``countdown``, ``eta`` and ``idempotency_key`` are
        therefore not passed to the task.
        """
        return await self.apply_async(
            task,
            args,
            kwargs,
            priority=priority,
            countdown=countdown,
            eta=eta,
            idempotency_key=idempotency_key,
        )

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
    ) -> str:
        """Queue a task; ``task_id`` or ``idempotency_key`` makes the call idempotent across
        your own retries, ``countdown``/``eta`` delay it, ``max_retries`` and ``time_limit``
        (seconds an attempt may run) override the task's own settings."""
        self._require_started()
        spec = _spec(
            task,
            args,
            kwargs,
            task_id,
            eta=_eta(countdown, eta),
            max_retries=max_retries,
            timeout=time_limit,
            idempotency_key=idempotency_key,
        )
        queue = _priority(task, priority)
        with send_spans([spec], queue) as (traced,):
            return await self._coalescers[queue].submit(traced)

    async def delay_with_callback(
        self,
        task: TaskRef,
        callback: Callback,
        *args: Any,
        priority: Priority | str | None = None,
        **kwargs: Any,
    ) -> str:
        """Queue a task; ``callback`` (sync or async) gets its final ``TaskResult`` when it
        ends, without polling. A callback that raises is logged; the others still run."""
        task_id = await self.apply_async(task, args, kwargs, priority=priority)
        self.watch(task_id, callback)
        return task_id

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
        reply = await self._request(self._results_channel(), message, Results, wait)
        self._remember(r for r in reply.results if r is not None)
        return reply.results

    async def submit_task(
        self,
        task_name: TaskRef,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        priority: Priority | str | None = None,
        timeout: float | None = None,
    ) -> TaskResult:
        """Queue a task and wait up to ``timeout`` seconds for its final result.

        Returns the result whatever its status (success, failure, cancelled); raises
        :class:`Timeout` if it is not final in time.
        """
        wait = self.timeout if timeout is None else timeout
        queue = _priority(task_name, priority)
        with send_spans([_spec(task_name, args, kwargs, None)], queue) as (spec,):
            reply = await self._send_submit(queue, [spec], wait, Results)
        return self._final(spec.id, reply.results[0], wait)

    async def submit_batch(
        self, items: Iterable[BatchItem | Mapping[str, Any] | tuple[Any, ...]]
    ) -> list[str]:
        """Queue many tasks, in messages of up to 1,000 per priority; ids in input order.

        Each message is accepted or rejected as a whole; if one is rejected its error is
        raised, and messages sent alongside it may already have been accepted.
        """
        by_priority: dict[Priority, list[TaskSpec]] = {}
        ids: list[str] = []
        for item in items:
            b = _batch_item(item)
            spec = _spec(b.task_name, b.args, b.kwargs, None)
            by_priority.setdefault(_priority(b.task_name, b.priority), []).append(spec)
            ids.append(spec.id)
        sends = [
            self._send_chunk(p, specs[i : i + BATCH_CHUNK])
            for p, specs in by_priority.items()
            for i in range(0, len(specs), BATCH_CHUNK)
        ]
        await asyncio.gather(*sends)
        return ids

    async def _send_chunk(self, priority: Priority, specs: list[TaskSpec]) -> None:
        with send_spans(specs, priority) as traced:
            await self._send_submit(priority, traced, None, Accepted)

    def _batch_sender(self, priority: Priority) -> SendBatch:
        async def send(specs: list[TaskSpec]) -> Accepted:
            message = Submit(tasks=specs, atomic=False)
            return await self._request(self._submit[priority], message, Accepted, None)

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
        reply = await self._request(self._submit[priority], message, reply_type, wait)
        if isinstance(reply, Results):
            self._remember(r for r in reply.results if r is not None)
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
        return self._final(task_id, results[0], wait)

    async def wait_results(
        self, task_ids: Sequence[str], timeout: float | None = None
    ) -> list[TaskResult]:
        """Wait until every task is final and return their results, in order (asked in
        messages of 1,000 ids, all at once). Raises ``Timeout`` if any is not final in
        time, ``TaskNotFound`` if any is unknown or expired."""
        wait = self.timeout if timeout is None else timeout
        chunks = [list(task_ids[i : i + BATCH_CHUNK]) for i in range(0, len(task_ids), BATCH_CHUNK)]
        replies = await asyncio.gather(*(self._get(chunk, wait) for chunk in chunks))
        return [
            self._final(task_id, result, wait)
            for chunk, results in zip(chunks, replies, strict=True)
            for task_id, result in zip(chunk, results, strict=True)
        ]

    async def wait(self, task_id: str, timeout: float | None = None) -> Any:
        """Wait for the task and return its value; raise ``TaskFailed`` / ``TaskCancelled``."""
        return unwrap(await self.wait_result(task_id, timeout))

    async def _get(self, task_ids: list[str], wait: float | None) -> list[TaskResult | None]:
        reply = await self._request(
            self._results_channel(), Get(task_ids=task_ids, wait=wait), Results, wait
        )
        self._remember(r for r in reply.results if r is not None)
        return reply.results

    def _final(self, task_id: str, result: TaskResult | None, wait: float) -> TaskResult:
        if result is None:
            raise TaskNotFound("task_not_found", f"task {task_id} is unknown or expired")
        if not result.status.is_final:
            raise Timeout(f"task {task_id} is still {result.status} after {wait:g} s")
        return result

    def get_result(self, task_id: str) -> TaskResult | None:
        """The last result this client saw for the task (no network call)."""
        return self._known.get(task_id)

    def get_status(self, task_id: str) -> TaskState | None:
        """The last status this client saw for the task (no network call)."""
        known = self._known.get(task_id)
        return known.status if known else None

    async def cancel_task(self, task_id: str) -> bool:
        """Cancel a task that has not finished; ``False`` if it already had."""
        reply = await self._request(
            self._results_channel(), Cancel(task_id=task_id), Cancelled, None
        )
        return reply.changed

    async def list_tasks(self, status: TaskState | str | None = None, limit: int = 100) -> TaskPage:
        state = TaskState(status) if status is not None else None
        reply = await self._request(
            self._results_channel(), ListTasks(status=state, limit=limit), TaskList, None
        )
        page = TaskPage(reply.tasks)
        page.more = reply.more
        return page

    async def list_schedules(self) -> list[ScheduleInfo]:
        """The periodic tasks: their schedule, next and last run, runs and skipped ticks."""
        reply = await self._request(self._results_channel(), ListSchedules(), ScheduleList, None)
        return reply.schedules

    async def list_workers(self) -> list[WorkerInfo]:
        reply = await self._request(self._results_channel(), ListWorkers(), WorkerList, None)
        return reply.workers

    # --- plumbing ---------------------------------------------------------------------------

    async def _request(
        self, channel: RequestChannel, message: Message, reply_type: type[M], wait: float | None
    ) -> M:
        # One deadline for the call: retries share it. A held wait gets its wait and a
        # short grace for the reply; other calls split the deadline between attempts.
        loop = asyncio.get_running_loop()
        total = self.timeout if wait is None else wait + min(self.timeout, _REPLY_GRACE)
        started = loop.time()
        deadline = started + total
        for attempt in range(self.retries + 1):
            left = deadline - loop.time()
            tries_left = self.retries + 1 - attempt
            per_try = left if wait is not None else left / tries_left
            try:
                return await channel.request(message, reply_type, per_try, self.connect_timeout)
            except EncodeError as exc:  # nothing was sent
                raise unsendable(exc) from exc
            except (Timeout, ControlPlaneUnavailable):
                now = loop.time()
                # Still no connection once the connect budget is spent: give up at once
                # rather than wait out the rest of the deadline.
                unreachable = not channel.connected and now - started >= self.connect_timeout
                if attempt == self.retries or now >= deadline or unreachable:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _results_channel(self) -> RequestChannel:
        self._require_started()
        assert self._results is not None
        return self._results

    def _require_started(self) -> None:
        if self._results is None:
            raise FastWorkerError(
                "client is not started: use `await client.start()` "
                "or `async with Client() as client`"
            )

    def _remember(self, results: Iterable[TaskResult]) -> None:
        for r in results:
            self._known[r.task_id] = r
            self._known.move_to_end(r.task_id)
        while len(self._known) > _KNOWN_RESULTS:
            self._known.popitem(last=False)


def unwrap(result: TaskResult) -> Any:
    """A final result's value, or the SDK error for how it ended."""
    if result.status == TaskState.SUCCESS:
        return result.result
    if result.status == TaskState.CANCELLED:
        raise TaskCancelled(result.task_id)
    if result.error is not None:
        raise TaskFailed(result.task_id, result.error)
    raise Timeout(f"task {result.task_id} is still {result.status}")


def announce_from_base(address: str) -> Announce:
    """The addresses of a control plane given its first submission address
    (``tcp://h:5555``, or ``tls+tcp://h:5555``)."""
    scheme, sep, rest = address.partition("://")
    host, _, port = rest.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if scheme not in {"tcp", "tls+tcp"} or not sep or not host or not port.isdigit():
        raise ValueError(f"address must look like tcp://host:5555, got {address!r}")
    ports, tls = PortMap(base=int(port)), scheme == "tls+tcp"
    return Announce(
        instance_id="",
        submit=[tcp_address(host, ports.submission(p), tls=tls) for p in Priority.by_rank()],
        results=tcp_address(host, ports.results, tls=tls),
        registration=tcp_address(host, ports.registration, tls=tls),
    )


def _spec(
    task: TaskRef,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    task_id: str | None,
    *,
    eta: float | None = None,
    max_retries: int | None = None,
    timeout: float | None = None,
    idempotency_key: str | None = None,
) -> TaskSpec:
    name = task if isinstance(task, str) else task.name
    arguments, keywords = list(args), dict(kwargs or {})
    _check_arguments(name, arguments, keywords)
    return TaskSpec(
        name=name,
        id=task_id or uuid.uuid4().hex,
        args=arguments,
        kwargs=keywords,
        eta=eta,
        max_retries=max_retries,
        timeout=timeout,
        idempotency_key=idempotency_key,
    )


def _check_arguments(name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Refuse, before anything is sent, a value that would not come back as itself
    (PROTOCOL.md §3, "Portable values"): a set, a UUID, a dataclass, an int past 64 bits..."""
    problem = check_portable(args, "args") or check_portable(kwargs, "kwargs")
    if problem is None and any(type(key) is not str for key in kwargs):
        problem = "kwargs has a key that is not a str"
    if problem is not None:
        raise InvalidArguments("invalid_arguments", f"{name}(): {problem}")


def _eta(countdown: float | None, eta: datetime | float | None) -> float | None:
    """The Unix time a delayed task is due, from a countdown or an ETA (naive = UTC)."""
    if countdown is not None and eta is not None:
        raise ValueError("give countdown or eta, not both")
    if countdown is not None:
        return time.time() + countdown
    if isinstance(eta, datetime):
        return (eta if eta.tzinfo else eta.replace(tzinfo=UTC)).timestamp()
    return eta


def _priority(task: TaskRef, priority: Priority | str | None) -> Priority:
    if priority is not None:
        return Priority.parse(priority)
    return Priority.NORMAL if isinstance(task, str) else task.priority


def _batch_item(item: BatchItem | Mapping[str, Any] | tuple[Any, ...]) -> BatchItem:
    if isinstance(item, BatchItem):
        return item
    if isinstance(item, tuple):
        return BatchItem(*item)
    name = item.get("task_name", item.get("name"))
    if not isinstance(name, str):
        raise ValueError(f"batch item has no task_name: {item!r}")
    return BatchItem(name, item.get("args", ()), item.get("kwargs") or {}, item.get("priority"))
