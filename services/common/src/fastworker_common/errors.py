"""The one exception tree of FastWorker, grouped by what the caller can do about it.

FastWorkerError
+-- ControlPlaneUnavailable    nothing connected or answered (or it is not the leader any
|                              more, ``unavailable``): start one, fix the address, retry;
|                              one that answered before "stopped answering" (see sightings)
+-- Timeout (TimeoutError)     it answered, but not within the time you gave
+-- RequestRejected            the control plane refused the request (has ``.code``)
|   +-- UnknownTask            no subworker ever registered that task name
|   +-- InvalidArguments       args/kwargs do not fit the task's signature (or cannot be sent)
|   |   +-- MessageTooLarge    the request is over the message size limit (``oversize``)
|   +-- TaskNotFound           no such task id (never existed, or expired)
+-- TaskFailed                 the task ran and raised (remote type, message, traceback)
+-- TaskCancelled              the task was cancelled before it finished

SoftTimeLimitExceeded is not raised by the SDK but inside a task: see ``@task``.
"""

from __future__ import annotations

from fastworker_protocol import EncodeError, ErrorCode, TaskError


class FastWorkerError(Exception):
    """Root of every error the SDK raises."""


class SoftTimeLimitExceeded(Exception):
    """Raised inside a process task when its ``soft_time_limit`` is up: catch it to clean
    up before the hard ``time_limit`` ends the process."""


class ControlPlaneUnavailable(FastWorkerError):
    """No control plane answered at the address tried, or the one that answered is not
    the leader of its replicas any more (the request took no effect there)."""


class LeaderUnavailable(ControlPlaneUnavailable):
    """The control plane answered ``unavailable``: it is not the leader of its replicas
    (any more), or refuses writes until enough of them are in sync. Unlike a lost
    connection, its coming back says nothing: the client looks for the leader."""


def nobody_at(address: str, what: str = "answered", within: float | None = None) -> str:
    """The message for a control plane that is not there, with what to try. ``address``
    may be a comma-separated list (discovery addresses of replicas): all are named."""
    hint = "is it running? Start one with `fastworker dev --task-modules <your module>`"
    if address.startswith("tls+tcp://"):
        hint += ", and check that --tls-ca is the CA of its certificate"
    when = "" if within is None else f" within {within:g} s"
    where = address
    if "," in address:
        where = "any of " + ", ".join(a.strip() for a in address.split(",") if a.strip())
    return f"no control plane {what} at {where}{when}: {hint}"


def nothing_announced(address: str, within: float, *, connected: bool) -> str:
    """The message for a discovery bus on which no control plane announced itself within
    ``within`` seconds. ``connected``: something listens there, so a control plane runs,
    but it names no leader: a replica that knows none (a deposed leader, or one of a set
    with no leader elected), or one still starting. Otherwise nothing runs there."""
    if not connected:
        return nobody_at(address, "announced itself", within)
    return (
        f"a control plane listens at {address} but named no leader within {within:g} s: it "
        "is a replica that knows no leader (a deposed leader, or no leader is elected: can "
        "the replicas reach etcd or the Kubernetes API?), or it is still starting; its "
        "log says which"
    )


def unreachable_announced(tried: str, announced: str, discovery: str) -> str:
    """The message for a control plane heard on discovery whose announced address does
    not connect from here (a Compose service name, seen from the host)."""
    first = discovery.split(",")[0].strip()  # of a list, the first: any host of it would do
    host = first.partition("://")[2].rpartition(":")[0] or "127.0.0.1"
    scheme = announced.partition("://")[0]
    port = announced.rpartition(":")[2]
    return (
        f"a control plane announced itself at {announced} but it cannot be reached from "
        f"here (no connection to {tried}): pass --address {scheme}://{host}:{port} "
        "(Client(address=...) in code), or the host's published port"
    )


def stopped_answering(address: str, ago: float, *, replicas: bool = False) -> str:
    """The message for a control plane that answered this process ``ago`` seconds ago and
    now refuses connections: it was stopped, restarted or crashed, not moved out of
    reach. Of ``replicas``, no other one answered either before the deadline."""
    if replicas:
        return (
            f"the control plane at {address} stopped answering (last seen {_ago(ago)} ago) "
            "and no other replica answered either: are they running? Their logs say why "
            "they stopped"
        )
    return (
        f"the control plane at {address} stopped answering (last seen {_ago(ago)} ago): "
        "it was stopped, restarted or crashed; start it again, or see its logs"
    )


def _ago(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


class Timeout(FastWorkerError, TimeoutError):
    """The control plane answered, but the operation did not finish in time."""


class RequestRejected(FastWorkerError):
    """The control plane replied with an error; ``code`` is the stable wire code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class UnknownTask(RequestRejected):
    pass


class InvalidArguments(RequestRejected):
    pass


class MessageTooLarge(InvalidArguments):
    """The request (its arguments, usually) is over the message size limit, whether the
    client found so before sending or the control plane did; nothing was queued."""


class TaskNotFound(RequestRejected):
    pass


class QueueFull(RequestRejected):
    """The priority is at its bound (``--max-queued``): nothing was queued; retry later."""


class Unauthorized(RequestRejected):
    """The control plane requires a shared token and this request's was missing or wrong."""


class TaskFailed(FastWorkerError):
    """The task raised. ``remote_type``, ``remote_message`` and ``remote_traceback`` are the
    exception as the subworker saw it; ``reason`` says how it failed (``exception``,
    ``worker_lost``, ``unserializable_result``...)."""

    def __init__(self, task_id: str, error: TaskError) -> None:
        super().__init__(f"task {task_id} failed: {error.type}: {error.message}")
        self.task_id = task_id
        self.remote_type = error.type
        self.remote_message = error.message
        self.remote_traceback = error.traceback
        self.reason = error.reason


class TaskCancelled(FastWorkerError):
    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} was cancelled")
        self.task_id = task_id


_REJECTIONS: dict[str, type[RequestRejected]] = {
    ErrorCode.UNKNOWN_TASK: UnknownTask,
    ErrorCode.INVALID_ARGUMENTS: InvalidArguments,
    ErrorCode.OVERSIZE: MessageTooLarge,
    ErrorCode.TASK_NOT_FOUND: TaskNotFound,
    ErrorCode.QUEUE_FULL: QueueFull,
    ErrorCode.UNAUTHORIZED: Unauthorized,
}


def unsendable(exc: EncodeError) -> InvalidArguments:
    """The SDK's error for a request the codec would not encode, before anything was sent."""
    # The codec chains the encoder's own error for a value it cannot encode; its size
    # check raises with no cause.
    if exc.__cause__ is None:
        return MessageTooLarge(ErrorCode.OVERSIZE, str(exc))
    return InvalidArguments(ErrorCode.INVALID_ARGUMENTS, str(exc))


def rejection(code: str, message: str, address: str | None = None) -> FastWorkerError:
    """The exception for an error reply with wire ``code`` (from ``address``, if known).

    ``unavailable`` is no refusal of the request but of the control plane's role (it is not
    the leader any more, or refuses writes until its replicas are in sync): the request
    took no effect, so it is ``ControlPlaneUnavailable``, which callers retry."""
    if code == ErrorCode.UNAVAILABLE:
        where = "the control plane" if address is None else f"the control plane at {address}"
        return LeaderUnavailable(f"{where} is unavailable: {message}")
    return _REJECTIONS.get(code, RequestRejected)(code, message)
