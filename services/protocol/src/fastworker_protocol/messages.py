# msgspec inherits frozen=True from Record; mypy's dataclass model does not know that:
# mypy: disable-error-code="misc"
"""Every message on the wire, as frozen structs tagged by ``op``.

Each struct encodes as a msgpack map ``{"op": <tag>, "v": 1, <fields>...}``. Field order on
the wire does not matter; unknown fields are ignored (the version rule in PROTOCOL.md).
Records that only ever travel inside a message (``TaskSpec``, ``TaskResult``, ...) carry
no ``op``.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from fastworker_protocol.errors import ErrorCode
from fastworker_protocol.limits import Count, PositiveSeconds, Seconds, UnixTime
from fastworker_protocol.priority import Priority
from fastworker_protocol.queues import DEFAULT_QUEUE, ConcurrencySetting, QueueName, Weight
from fastworker_protocol.reasons import FailureReason
from fastworker_protocol.states import TaskState, WorkerState

PROTOCOL_VERSION = 1

# A run limit is ``time_limit`` in code, but its key on the wire stays ``timeout``, its older
# name: renaming a key is a version-2 change (PROTOCOL.md §12), and a task's counted size
# includes its keys.
_LIMIT_KEY = "timeout"


class Record(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=False, gc=False):
    """A plain record nested in messages.

    ``gc=False``: messages never take part in reference cycles, so the cyclic garbage
    collector need not track them; with a hundred thousand tasks in flight that saves it
    from walking every one of them on each collection.
    """


class Message(Record, tag_field="op", kw_only=True):
    """Base of every top-level message. ``auth`` carries the shared token of a control
    plane that requires one (requests only; replies never carry it)."""

    v: int = PROTOCOL_VERSION
    auth: str | None = None


# --- records ----------------------------------------------------------------------------


class TaskSpec(Record):
    """A task as submitted. An empty ``id`` asks the control plane to assign one.

    ``eta`` (Unix seconds) delays it; ``max_retries`` and ``time_limit`` (seconds an attempt
    may run) override the task's own settings. A task submitted with the ``idempotency_key``
    of a known task of the same name is that task (its id comes back; nothing new is
    queued). ``queue`` overrides the queue the task's registration names (``"default"``
    when none does).
    """

    name: str
    id: str = ""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    headers: dict[str, str] = {}
    eta: UnixTime | None = None
    max_retries: Count | None = None
    time_limit: PositiveSeconds | None = msgspec.field(default=None, name=_LIMIT_KEY)
    idempotency_key: str | None = None
    queue: QueueName | None = None


class Assignment(Record):
    """A task handed to a subworker; ``attempt`` counts deliveries, starting at 1."""

    id: str
    name: str
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    headers: dict[str, str] = {}
    attempt: int = 1
    time_limit: float | None = msgspec.field(default=None, name=_LIMIT_KEY)
    priority: Priority | None = None  # the queue it came from (for traces and logs)
    queue: str = DEFAULT_QUEUE  # the named queue it came from
    eta: float | None = None  # when it was due, if it was delayed (Unix seconds)


class TaskError(Record):
    """Why a task failed: the remote exception's type, message and formatted traceback."""

    type: str
    message: str
    traceback: str = ""
    reason: str = FailureReason.EXCEPTION  # a FailureReason; str so unknown ones still decode


class TaskResult(Record):
    """What the control plane knows of one task. Times are Unix seconds.

    ``truncated``: a listing left part of it out (its result, the end of long error
    texts) to fit the reply; a ``get`` of the task returns it whole.
    """

    task_id: str
    name: str
    status: TaskState
    priority: Priority = Priority.NORMAL
    result: Any = None
    error: TaskError | None = None
    attempts: int = 0
    worker_id: str | None = None
    submitted_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    eta: float | None = None
    attempt_errors: list[TaskError] = []
    truncated: bool = False
    queue: str = DEFAULT_QUEUE
    retry_of: str | None = None  # the dead letter this task runs again (retry_failed)


class Param(Record, omit_defaults=True):
    """One parameter of a task's signature (``kind`` is an ``inspect.Parameter`` kind name)."""

    name: str
    kind: str
    has_default: bool = False


class TaskSignature(Record, omit_defaults=True):
    """A task as a subworker registers it: parameters, and how failures are retried.

    A failed attempt is retried up to ``max_retries`` times, after a delay drawn
    uniformly from ``[0, min(retry_backoff_max, retry_backoff * 2 ** (retry - 1))]``
    (exponential backoff, full jitter), if its error type is in ``retry_on`` (empty: any).

    Fields at their defaults are left out on the wire (a registration lists many tasks).
    ``queue`` is where its submissions go unless one names another. ``rate_limit``
    (``"20/m"``) and ``concurrency_limit`` (running at once; per value of the argument
    ``concurrency_key`` when given) are enforced by the control plane over all subworkers.
    """

    name: str
    params: list[Param] = []
    max_retries: Count = 0
    retry_backoff: Seconds = 1.0
    retry_backoff_max: Seconds = 600.0
    retry_on: list[str] = []
    time_limit: PositiveSeconds | None = msgspec.field(default=None, name=_LIMIT_KEY)
    repeat_interval: float | None = None
    cron: str | None = None
    cron_tz: str = "UTC"
    queue: QueueName = DEFAULT_QUEUE
    rate_limit: str | None = None
    concurrency_limit: Annotated[int, msgspec.Meta(ge=1)] | None = None
    concurrency_key: str | None = None
    # The priority its periodic runs take; and how long its result is kept (0: not at
    # all; ``None``: the control plane's ``--result-ttl``).
    priority: Priority = Priority.NORMAL
    result_ttl: Seconds | None = None


class Outcome(Record):
    """A subworker's report of one finished attempt.

    ``ok`` with ``result``, or not ``ok`` with ``error``. ``requeue`` means the attempt was
    interrupted (shutdown) rather than failed, and the control plane should deliver it again.
    ``retryable`` is the subworker's verdict on the task's ``retry_on`` (an ``isinstance``
    check where the exception lives); ``None`` from peers that do not decide it.
    ``retry_in``, with an error of reason ``retry`` (the task asked to be tried again), is
    the delay in seconds it asked for before the next attempt (``None``: its backoff).
    """

    task_id: str
    ok: bool
    result: Any = None
    error: TaskError | None = None
    started_at: UnixTime | None = None
    finished_at: UnixTime | None = None
    requeue: bool = False
    retryable: bool | None = None
    retry_in: float | None = None


class ScheduleInfo(Record):
    """A periodic task's schedule: ``spec`` is "every N s" or "cron EXPR"; times Unix s."""

    name: str
    spec: str
    next_run: float
    last_run: float | None = None
    times_run: int = 0
    skipped: int = 0
    running: bool = False
    # Issue 22: a schedule made at run time (``source="runtime"``) runs ``task`` with
    # these arguments; a declared one (``source="declared"``) runs the task it is named for.
    source: str = "declared"
    task: str | None = None
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    priority: Priority = Priority.NORMAL
    queue: str | None = None


class WorkerInfo(Record):
    worker_id: str
    name: str
    state: WorkerState
    concurrency: int
    in_flight: int
    completed: int
    tasks: list[str]
    last_seen_ago: float
    local: bool = False
    queues: dict[str, int] = {}


class QueueInfo(Record):
    """One named queue: queued tasks per priority (those waiting on a limit included),
    the age of its oldest queued task, its running tasks, the workers serving it, whether
    it is paused, and its limits (as in effect: declared or set at run time)."""

    name: str
    depth: dict[str, int]
    oldest_age: float | None = None
    running: int = 0
    workers: int = 0
    paused: bool = False
    rate_limit: str | None = None
    concurrency_limit: int | None = None
    waiting_on_limits: int = 0


class LimitInfo(Record):
    """A rate or concurrency limit in effect on a queue or a task name (``scope``).
    ``overridden``: set at run time (kept until reset, across restarts with a state dir)
    rather than declared by ``@task``. ``waiting``: queued tasks it holds back now."""

    scope: str
    name: str
    rate_limit: str | None = None
    concurrency_limit: int | None = None
    concurrency_key: str | None = None
    overridden: bool = False
    running: int = 0
    waiting: int = 0


# --- client -> control plane, submission ports -------------------------------------------


class Submit(Message, tag="submit"):
    """Queue ``tasks`` at the priority of the port it arrives on.

    Without ``wait`` the reply is ``Accepted``; with ``wait`` (seconds) the reply is held until
    every task is final or ``wait`` passes, and is ``Results``. ``atomic`` (the default)
    accepts all tasks or none; ``atomic=false`` accepts each valid task on its own and lists
    the others in ``Accepted.rejected`` (it cannot be combined with ``wait``).
    """

    tasks: list[TaskSpec]
    wait: Seconds | None = None
    atomic: bool = True


# --- client -> control plane, results port ------------------------------------------------


class Get(Message, tag="get"):
    """Read tasks' results (``None`` for unknown ids); ``wait`` as in ``Submit``. With
    ``any``, a held ``get`` is answered as soon as one of the tasks is final."""

    task_ids: list[str]
    wait: Seconds | None = None
    any: bool = False


class Cancel(Message, tag="cancel"):
    task_id: str


class ListTasks(Message, tag="list_tasks"):
    status: TaskState | None = None
    limit: int = 100


class ListWorkers(Message, tag="list_workers"):
    pass


class ListSchedules(Message, tag="list_schedules"):
    pass


class ListQueues(Message, tag="list_queues"):
    pass


class QueueAction(Message, tag="queue_action"):
    """``pause`` stops dispatch from a queue (submissions are still accepted), ``resume``
    starts it again, ``purge`` cancels every task queued in it (not running, delayed or
    retrying ones). Pausing is kept across restarts with a state dir."""

    queue: QueueName
    action: Annotated[str, msgspec.Meta(pattern="^(pause|resume|purge)$")]


class ListLimits(Message, tag="list_limits"):
    pass


class SetLimit(Message, tag="set_limit"):
    """Change the limits of a queue or a task name (``scope``) at run time. ``None``
    leaves a limit as it is; ``"off"`` / ``0`` lifts it; ``reset`` first drops every
    change made at run time, back to what ``@task`` declared."""

    scope: Annotated[str, msgspec.Meta(pattern="^(queue|task)$")]
    name: str
    rate_limit: str | None = None
    concurrency_limit: ConcurrencySetting | None = None
    reset: bool = False


# --- subworker -> control plane, registration port ------------------------------------------


class Register(Message, tag="register"):
    """``confirms``: the worker lists the ``batch`` of every ``Assign`` it receives in its
    next request's ``received``, so the control plane can take back a batch that never
    arrived (see PROTOCOL.md, "Confirming assignments"). ``queues`` maps the queues it
    serves to their weights in its fair share; without it, it serves every queue its
    tasks' registrations name, at weight 1. ``holding``, when it registers again, lists
    the tasks it still holds (running, waiting for a slot, or finished with the outcome
    not yet reported): a control plane that took over leaves those with it and
    redelivers the others it had (see PROTOCOL.md, "Registering again")."""

    worker_id: str
    name: str
    concurrency: int
    tasks: list[TaskSignature]
    confirms: bool = False
    queues: dict[QueueName, Weight] | None = None
    holding: list[str] | None = None


class Fetch(Message, tag="fetch"):
    """Ask for work; held up to ``wait`` seconds when there is none. Doubles as heartbeat.

    ``prefetch`` is how many tasks beyond its concurrency the worker wants buffered;
    ``started`` and ``outcomes`` report as ``Report`` does, before the fetch is held;
    ``received`` confirms the ``Assign`` batches received since the last request.
    """

    worker_id: str
    wait: Seconds
    prefetch: Count = 0
    started: list[str] = []
    outcomes: list[Outcome] = []
    received: list[int] = []


class Report(Message, tag="report"):
    worker_id: str
    started: list[str] = []
    outcomes: list[Outcome] = []
    received: list[int] = []


class Drain(Message, tag="drain"):
    """The subworker takes no new work from now on."""

    worker_id: str


class Unregister(Message, tag="unregister"):
    worker_id: str


# --- replies ----------------------------------------------------------------------------------


class Rejection(Record):
    """Why the task at ``index`` of a non-atomic ``Submit`` was not accepted."""

    index: int
    code: ErrorCode
    message: str


class Accepted(Message, tag="accepted"):
    """One id per submitted task, in order; ``""`` for a task listed in ``rejected``."""

    task_ids: list[str]
    rejected: list[Rejection] = []


class Results(Message, tag="results"):
    results: list[TaskResult | None]


class Cancelled(Message, tag="cancelled"):
    """``changed`` is false when the task was already final; ``status`` is its state now."""

    task_id: str
    status: TaskState
    changed: bool


class TaskList(Message, tag="tasks"):
    """``more``: matching tasks were left out because the reply had no room for them."""

    tasks: list[TaskResult]
    more: bool = False


class WorkerList(Message, tag="workers"):
    workers: list[WorkerInfo]


class ScheduleList(Message, tag="schedules"):
    schedules: list[ScheduleInfo]


class QueueList(Message, tag="queues"):
    queues: list[QueueInfo]


class QueueActed(Message, tag="queue_acted"):
    """The queue after a ``queue_action``; ``purged`` counts the tasks a purge cancelled."""

    queue: str
    paused: bool
    purged: int = 0


class LimitList(Message, tag="limits"):
    limits: list[LimitInfo]


class Registered(Message, tag="registered"):
    worker_id: str
    control_plane_id: str
    heartbeat_timeout: float


class Assign(Message, tag="assign"):
    """Tasks to run, and ids of tasks this worker holds that were cancelled meanwhile.
    ``batch`` (non-zero only for a worker that ``confirms``, when there are tasks) is what
    the worker's next request lists in ``received``."""

    tasks: list[Assignment]
    cancel: list[str] = []
    batch: int = 0


class Ack(Message, tag="ack"):
    pass


class Error(Message, tag="error"):
    code: ErrorCode
    message: str
    detail: dict[str, Any] = {}


# --- discovery bus ------------------------------------------------------------------------------


class Announce(Message, tag="announce"):
    """A control plane's addresses, broadcast every 2 s and in answer to ``Probe``.

    ``submit`` lists the four submission addresses, most urgent priority first.
    ``epoch`` is the leader's term when control planes are replicated (0: one control
    plane alone); a follower announces its leader's addresses under the leader's
    ``instance_id`` and ``epoch``. Peers ignore an announcement with a nonzero ``epoch``
    lower than the highest they have heard: it names a leader already replaced (epoch 0,
    a control plane alone, is always heard).
    """

    instance_id: str
    submit: list[str]
    results: str
    registration: str
    http: str | None = None
    version: str = ""
    epoch: int = 0


class Probe(Message, tag="probe"):
    """Ask every control plane on the bus to announce itself now."""

    role: str = "client"


def __getattr__(name: str) -> object:
    """``AnyMessage``, ``ALL_MESSAGES`` and ``OPS`` moved to ``fastworker_protocol.union``
    (the workflow messages are part of it and import this module); still importable here."""
    if name in ("AnyMessage", "ALL_MESSAGES", "OPS"):
        from fastworker_protocol import union

        return getattr(union, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
