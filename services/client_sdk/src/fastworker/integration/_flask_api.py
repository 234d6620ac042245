"""The opt-in task API of the Flask extension, ``fw.blueprint()``: submit any registered
task by name, read a task, wait a little for its result, cancel it, all as JSON.

Its views are thin: each makes one call of the app's blocking client; the SDK's errors
become the HTTP statuses a caller can act on (``ERRORS``). It exposes every registered
task to whoever can reach it, so the app mounts it behind its own authentication.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from flask import Blueprint, request
from flask.typing import ResponseReturnValue

from fastworker.errors import (
    ControlPlaneUnavailable,
    InvalidArguments,
    QueueFull,
    RequestRejected,
    TaskNotFound,
    Timeout,
    UnknownTask,
)
from fastworker.sync_client import SyncClient
from fastworker_protocol import Priority, TaskResult
from fastworker_protocol.queues import QUEUE_PATTERN

__all__ = ["ERRORS", "MAX_WAIT", "SubmitBody", "task_api"]

MAX_WAIT = 60.0  # longest ``/result?wait=`` a view holds its thread

# Each error (or a subclass) as (status, whether to say Retry-After); first match wins.
ERRORS: tuple[tuple[type[Exception], int, bool], ...] = (
    (UnknownTask, 404, False),
    (TaskNotFound, 404, False),
    (InvalidArguments, 422, False),
    (QueueFull, 503, True),
    (ControlPlaneUnavailable, 503, True),
    (Timeout, 503, False),
    (RequestRejected, 400, False),
)


class SubmitBody(msgspec.Struct, forbid_unknown_fields=True):
    """The JSON body of ``POST {prefix}/{task_name}``; every field is optional."""

    args: list[Any] = msgspec.field(default_factory=list)
    kwargs: dict[str, Any] = msgspec.field(default_factory=dict)
    priority: Priority | None = None
    countdown: Annotated[float, msgspec.Meta(ge=0)] | None = None
    idempotency_key: str | None = None
    queue: Annotated[str, msgspec.Meta(pattern=QUEUE_PATTERN)] | None = None


class BadBody(Exception):
    """A submission body that is not a ``SubmitBody``."""


def submit_body(data: Any) -> SubmitBody:
    """The body as a ``SubmitBody`` (no body at all is an empty one), else ``BadBody``."""
    try:
        return msgspec.convert({} if data is None else data, SubmitBody)
    except msgspec.ValidationError as exc:
        raise BadBody(f"bad submission body: {exc}") from None


def error_reply(exc: Exception) -> ResponseReturnValue:
    """``exc`` as ``{"detail": ...}`` with its status from ``ERRORS``; anything else is
    raised again (Flask answers 500)."""
    for kind, status, retry in ERRORS:
        if isinstance(exc, kind):
            return {"detail": str(exc)}, status, {"Retry-After": "1"} if retry else {}
    raise exc


def task_api(client: Callable[[], SyncClient], name: str, url_prefix: str) -> Blueprint:
    """The blueprint; ``client`` returns the current app's connected client."""
    api = Blueprint(name, __name__, url_prefix=url_prefix)

    @api.post("/<task_name>")
    def submit(task_name: str) -> ResponseReturnValue:
        body = submit_body(request.get_json(silent=True) if request.data else None)
        task_id = client().apply_async(
            task_name,
            body.args,
            body.kwargs,
            priority=body.priority,
            countdown=body.countdown,
            idempotency_key=body.idempotency_key,
            queue=body.queue,
        )
        return {"task_id": task_id}, 202

    @api.get("/<task_id>")
    def status(task_id: str) -> ResponseReturnValue:
        return _as_json(_known(client(), task_id))

    @api.get("/<task_id>/result")
    def result(task_id: str) -> ResponseReturnValue:
        """200 once the task is final, 202 before; ``?wait=S`` waits up to S seconds."""
        wait = min(request.args.get("wait", 0.0, type=float), MAX_WAIT)
        found = _known(client(), task_id)
        if not found.status.is_final and wait > 0:
            with contextlib.suppress(Timeout):
                found = client().wait_result(task_id, wait)
        return _as_json(found), 200 if found.status.is_final else 202

    @api.delete("/<task_id>")
    def cancel(task_id: str) -> ResponseReturnValue:
        return {"task_id": task_id, "cancelled": client().cancel_task(task_id)}

    for kind, _, _ in ERRORS:
        api.register_error_handler(kind, error_reply)
    api.register_error_handler(BadBody, _bad_body)
    return api


def _known(client: SyncClient, task_id: str) -> TaskResult:
    found = client.get_task_result(task_id)
    if found is None:
        raise TaskNotFound("task_not_found", f"task {task_id} is unknown or its result expired")
    return found


def _as_json(result: TaskResult) -> dict[str, Any]:
    built: dict[str, Any] = msgspec.to_builtins(result)
    return built


def _bad_body(exc: BadBody) -> ResponseReturnValue:
    return {"detail": str(exc)}, 422
