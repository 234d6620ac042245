"""What the clients' calls send and how their replies are read, with no I/O.

The async :class:`~fastworker.client.Client` and the blocking
:class:`~fastworker.sync_client.SyncClient` move bytes differently (an event loop, or
the calling thread), but build the same messages, retry within the same deadline and
turn replies into the same values and errors: that part lives here, once.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastworker._task import Task
from fastworker.tls import TLS
from fastworker_common import local
from fastworker_common.errors import (
    InvalidArguments,
    TaskCancelled,
    TaskFailed,
    TaskNotFound,
    Timeout,
    unreachable_announced,
)
from fastworker_common.leader import addresses, follows
from fastworker_common.sightings import Peer, Sightings
from fastworker_protocol import (
    DEFAULT_DISCOVERY_ADDRESS,
    Announce,
    Codec,
    PortMap,
    Priority,
    QueueAction,
    SetLimit,
    TaskList,
    TaskResult,
    TaskSpec,
    TaskState,
    check_queue,
    check_rate,
    portable_form,
    tcp_address,
)

TaskRef = str | Task[..., Any]
BATCH_CHUNK = 1000  # tasks per submit message, ids per get message
DEFAULT_CONNECT_TIMEOUT = 3.0
REPLY_GRACE = 5.0  # seconds a held wait allows past its wait for the reply to arrive
# NNG waits in whole milliseconds, rounded down, so a wait of the whole connect budget may
# end a hair before it: that still spent it (else a second attempt doubles the wait).
CLOCK_SLACK = 0.005
KNOWN_RESULTS = 10_000  # results a client remembers for get_result/get_status


@dataclass(frozen=True)
class Settings:
    """A client's settings, checked, and completed from the environment, once."""

    discovery_address: str  # one address, or a comma-separated list (one per replica)
    timeout: float
    retries: int
    connect_timeout: float
    address: str | None  # an explicit submission address: no discovery
    codec: Codec
    auth: str | None  # the control plane's shared token
    tls: TLS | None

    @classmethod
    def of(
        cls,
        discovery_address: str | None,
        timeout: float,
        retries: int,
        *,
        address: str | None,
        max_message_size: int,
        auth_token: str | None,
        tls: TLS | None,
        connect_timeout: float,
    ) -> Settings:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        if connect_timeout <= 0:
            raise ValueError("connect_timeout must be positive")
        discovery = (
            discovery_address
            or os.environ.get("FASTWORKER_DISCOVERY_ADDRESS")
            or DEFAULT_DISCOVERY_ADDRESS
        )
        return cls(
            discovery_address=",".join(addresses(discovery)),
            timeout=timeout,
            retries=retries,
            connect_timeout=min(connect_timeout, timeout),
            address=address,
            codec=Codec(max_message_size, decode_values=True),  # results as their types
            auth=auth_token or os.environ.get("FASTWORKER_AUTH_TOKEN") or None,
            tls=tls or TLS.from_env(),
        )

    def budget(self, wait: float | None) -> Budget:
        return Budget(self.timeout, self.retries, self.connect_timeout, wait)

    def unreachable(self, address: str, announce: Announce) -> str | None:
        """What to say when ``address`` cannot be reached: for an announced address, that
        it was announced (by whom, and where it was heard); ``None``: the default."""
        if self.address is not None:
            return None
        return unreachable_announced(address, announce.submit[0], self.discovery_address)

    def peer(self, announce: Announce, sightings: Sightings) -> Peer:
        """The control plane that made ``announce``, as a channel to any of its lanes
        names it once it stops answering (by its first submission address, the one
        ``--address`` takes), its replies recorded in the client's ``sightings``."""
        replicas = follows(announce, self.address)
        return Peer(announce.submit[0], sightings, replicas=replicas)


class KnownResults:
    """The last result a client saw of each of its latest tasks; thread-safe."""

    def __init__(self, limit: int = KNOWN_RESULTS) -> None:
        self._limit = limit
        self._results: OrderedDict[str, TaskResult] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, results: Iterable[TaskResult | None]) -> None:
        with self._lock:
            for r in results:
                if r is not None:
                    self._results[r.task_id] = r
                    self._results.move_to_end(r.task_id)
            while len(self._results) > self._limit:
                self._results.popitem(last=False)

    def get(self, task_id: str) -> TaskResult | None:
        return self._results.get(task_id)


@dataclass(frozen=True)
class BatchItem:
    """One task of a ``submit_batch`` call."""

    task_name: str
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    priority: Priority | str | None = None
    queue: str | None = None


class TaskPage(list[TaskResult]):
    """What ``list_tasks`` returns: the tasks, most recent first, and ``more``: whether
    matching tasks within the limit were left out because they did not fit one reply
    (ask for fewer, or by status). A listed task whose result was too large to list has
    ``truncated`` set; ``wait_result``/``get_task_result`` return it whole."""

    more: bool = False


@dataclass(frozen=True)
class Budget:
    """One call's deadline, shared by its attempts.

    A held wait (``wait`` set) gets its wait and a short grace for the reply, all for its
    first attempt; other calls split what is left of the deadline between the attempts
    still allowed, so a lost reply leaves time to ask again.
    """

    timeout: float
    retries: int
    connect_timeout: float
    wait: float | None = None

    @property
    def total(self) -> float:
        if self.wait is None:
            return self.timeout
        return self.wait + min(self.timeout, REPLY_GRACE)

    def per_try(self, attempt: int, left: float) -> float:
        """Seconds attempt ``attempt`` (from 0) may take, with ``left`` of the deadline."""
        return left if self.wait is not None else left / (self.retries + 1 - attempt)

    def give_up(self, attempt: int, elapsed: float, connected: bool) -> bool:
        """Whether a failed attempt is the last: no attempts or time left, or still no
        connection once the connect budget is spent (waiting longer would not help)."""
        return (
            attempt >= self.retries
            or elapsed >= self.total
            or (not connected and elapsed >= self.connect_timeout - CLOCK_SLACK)
        )


def task_spec(
    task: TaskRef,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    task_id: str | None = None,
    *,
    eta: float | None = None,
    max_retries: int | None = None,
    time_limit: float | None = None,
    idempotency_key: str | None = None,
    queue: str | None = None,
) -> TaskSpec:
    """The task as it is sent, its arguments checked first. Its queue is ``queue``, else
    the one the ``@task`` object names, else (by name) the one its registration names."""
    name = task if isinstance(task, str) else task.name
    if queue is not None:
        check_queue(queue)
    elif not isinstance(task, str):
        queue = task.queue
    arguments, keywords = check_arguments(name, list(args), dict(kwargs or {}))
    return TaskSpec(
        name=name,
        id=task_id or uuid.uuid4().hex,
        args=arguments,
        kwargs=keywords,
        eta=eta,
        max_retries=max_retries,
        time_limit=time_limit,
        idempotency_key=idempotency_key,
        queue=queue,
    )


def queue_action(queue: str, action: str) -> QueueAction:
    return QueueAction(queue=check_queue(queue), action=action)


def limit_change(
    scope: str, name: str, rate: str | None, concurrency: int | None, reset: bool
) -> SetLimit:
    """A ``SetLimit``, checked: ``rate`` like ``"20/m"`` (``"off"`` lifts it),
    ``concurrency`` at least 0 (0 lifts it)."""
    if scope not in ("queue", "task"):
        raise ValueError(f"scope must be 'queue' or 'task', not {scope!r}")
    if scope == "queue":
        check_queue(name)
    if rate is not None and rate != "off":
        check_rate(rate)
    if concurrency is not None and concurrency < 0:
        raise ValueError("concurrency must be 0 (no limit) or more")
    return SetLimit(
        scope=scope, name=name, rate_limit=rate, concurrency_limit=concurrency, reset=reset
    )


def check_arguments(
    name: str, args: list[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments as they are sent (a UUID, a Decimal or a registered type as its
    msgpack extension value), refusing before anything is sent a value that would not come
    back as itself (PROTOCOL.md §3, "Portable values"): a set, an unregistered dataclass,
    an int past 64 bits..."""
    args, problem = portable_form(args, "args")
    if problem is None:
        kwargs, problem = portable_form(kwargs, "kwargs")
    if problem is None and any(type(key) is not str for key in kwargs):
        problem = "kwargs has a key that is not a str"
    if problem is not None:
        raise InvalidArguments("invalid_arguments", f"{name}(): {problem}")
    return args, kwargs


def eta_of(countdown: float | None, eta: datetime | float | None) -> float | None:
    """The Unix time a delayed task is due, from a countdown or an ETA (naive = UTC)."""
    if countdown is not None and eta is not None:
        raise ValueError("give countdown or eta, not both")
    if countdown is not None:
        return local.now() + countdown
    if isinstance(eta, datetime):
        return (eta if eta.tzinfo else eta.replace(tzinfo=UTC)).timestamp()
    return eta


def priority_of(task: TaskRef, priority: Priority | str | None) -> Priority:
    if priority is not None:
        return Priority.parse(priority)
    return Priority.NORMAL if isinstance(task, str) else task.priority


def batch_item(item: BatchItem | Mapping[str, Any] | tuple[Any, ...]) -> BatchItem:
    if isinstance(item, BatchItem):
        return item
    if isinstance(item, tuple):
        return BatchItem(*item)
    name = item.get("task_name", item.get("name"))
    if not isinstance(name, str):
        raise ValueError(f"batch item has no task_name: {item!r}")
    return BatchItem(
        name,
        item.get("args", ()),
        item.get("kwargs") or {},
        item.get("priority"),
        item.get("queue"),
    )


def batch_specs(
    items: Sequence[BatchItem | Mapping[str, Any] | tuple[Any, ...]],
) -> tuple[list[str], list[tuple[Priority, list[TaskSpec]]]]:
    """``submit_batch``'s ids in input order, and its messages: up to ``BATCH_CHUNK``
    tasks each, one priority each."""
    by_priority: dict[Priority, list[TaskSpec]] = {}
    ids: list[str] = []
    for item in items:
        b = batch_item(item)
        spec = task_spec(b.task_name, b.args, b.kwargs, queue=b.queue)
        by_priority.setdefault(priority_of(b.task_name, b.priority), []).append(spec)
        ids.append(spec.id)
    chunks = [
        (p, specs[i : i + BATCH_CHUNK])
        for p, specs in by_priority.items()
        for i in range(0, len(specs), BATCH_CHUNK)
    ]
    return ids, chunks


def id_chunks(task_ids: Sequence[str]) -> list[list[str]]:
    return [list(task_ids[i : i + BATCH_CHUNK]) for i in range(0, len(task_ids), BATCH_CHUNK)]


MIN_HELD = 0.5  # a held wait is asked again no sooner than this after the last one


def pause_before_asking_again(
    still_running: bool, deadline: float | None, asked: float, now: float
) -> float | None:
    """Seconds to pause before sending a held wait again (asked at ``asked``, answered
    ``now``), or ``None`` to return its answer: nothing is still running, or no time is
    left. The control plane lets go of a held wait at its ``--max-wait``, and at once when
    it holds ``--max-held-waits`` already: then the wait is asked again after a pause, not
    in a busy loop, and not given up early."""
    if deadline is None or now >= deadline or not still_running:
        return None
    return min(max(0.0, asked + MIN_HELD - now), deadline - now)


def pause_before_getting_again(
    results: Sequence[TaskResult | None], deadline: float | None, asked: float, now: float
) -> float | None:
    """``pause_before_asking_again`` for a ``get``: some task it names is not final."""
    running = any(r is not None and not r.status.is_final for r in results)
    return pause_before_asking_again(running, deadline, asked, now)


def left_to_wait(
    result: TaskResult | None, wait: float, started: float, now: float
) -> float | None:
    """Seconds a ``submit_task`` whose reply came with ``result`` still has to wait for it
    with ``get``, or ``None``: it is final (or unknown), or no time is left. A control plane
    answers a held submit early past its ``--max-wait`` or ``--max-held-waits``."""
    if result is None or result.status.is_final:
        return None
    left = started + wait - now
    return left if left > 0 else None


def final(task_id: str, result: TaskResult | None, wait: float) -> TaskResult:
    """A waited-for result, which must exist and be final."""
    if result is None:
        raise TaskNotFound("task_not_found", f"task {task_id} is unknown or expired")
    if not result.status.is_final:
        raise Timeout(f"task {task_id} is still {result.status} after {wait:g} s")
    return result


def unwrap(result: TaskResult) -> Any:
    """A final result's value, or the SDK error for how it ended."""
    if result.status == TaskState.SUCCESS:
        return result.result
    if result.status == TaskState.CANCELLED:
        raise TaskCancelled(result.task_id)
    if result.error is not None:
        raise TaskFailed(result.task_id, result.error)
    raise Timeout(f"task {result.task_id} is still {result.status}")


def task_page(reply: TaskList) -> TaskPage:
    page = TaskPage(reply.tasks)
    page.more = reply.more
    return page


def lane_address(announce: Announce, lane: Priority | None) -> str:
    """Where ``announce`` takes submissions of priority ``lane`` (``None``: results)."""
    if lane is None:
        return announce.results
    return announce.submit[Priority.by_rank().index(lane)]


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


DELAY_OPTIONS = ("priority", "countdown", "eta", "idempotency_key", "queue")


def delay_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take ``delay``'s own options out of ``kwargs`` (the rest are the task's)."""
    return {name: kwargs.pop(name) for name in DELAY_OPTIONS if name in kwargs}
