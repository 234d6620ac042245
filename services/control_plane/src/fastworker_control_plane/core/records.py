"""A live task as the control plane holds it until it is final."""

from __future__ import annotations

from typing import Any

import msgspec

from fastworker_control_plane.core.stats import TaskLine
from fastworker_protocol import (
    DEFAULT_QUEUE,
    Assignment,
    Priority,
    TaskError,
    TaskEvent,
    TaskResult,
    TaskSpec,
    TaskState,
    next_task_state,
)

_encoder = msgspec.msgpack.Encoder()


_RECORD_BYTES = 128  # about what a final record's fixed fields encode to


class TaskRecord(msgspec.Struct, gc=False, array_like=True, omit_defaults=True):
    """Mutable; like the messages, never part of a reference cycle (see ``Record``)."""

    id: str
    name: str
    priority: Priority
    args: list[Any]
    kwargs: dict[str, Any]
    headers: dict[str, str]
    submitted_at: float
    queued_at: float = 0.0  # when it last joined a queue, for the queue-wait histogram
    size: int = 0  # encoded bytes (plus Assign overhead), to keep Assign replies in bounds
    state: TaskState = TaskState.PENDING
    attempts: int = 0
    worker_id: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    result: Any = None
    error: TaskError | None = None
    eta: float | None = None
    max_retries: int | None = None  # this submission's override of the task's policy
    time_limit: float | None = None
    retries: int = 0
    lost: int = 0  # times the worker running it was lost
    returned: int = 0  # times a lost worker held it without having started it
    attempt_errors: list[TaskError] = msgspec.field(default_factory=list)
    idempotency_key: str | None = None
    seq: int = 0  # its place in its queue (lower goes first), kept across restarts
    line: TaskLine | None = None  # where its statistics go (set when it is accepted)
    final: TaskResult | None = None  # its result, once final (what reads return)
    # False once a final task's args and kwargs were let go (it never runs again).
    arguments_kept: bool = True
    queue: str = DEFAULT_QUEUE  # the named queue it waits in
    retry_of: str | None = None  # the dead letter it runs again (``retry_failed``)
    # How long its result is kept once final (its task's ``result_ttl``; ``None``: the
    # control plane's): set when it finishes, and journaled, since a restart replays
    # results before any registration says it again.
    result_ttl: float | None = None

    @classmethod
    def from_spec(cls, spec: TaskSpec, priority: Priority, now: float, size: int) -> TaskRecord:
        return cls(
            spec.id,
            spec.name,
            priority,
            spec.args,
            spec.kwargs,
            spec.headers,
            now,
            now,
            size,
            eta=spec.eta,
            max_retries=spec.max_retries,
            time_limit=spec.time_limit,
            idempotency_key=spec.idempotency_key,
        )

    def stored(self) -> TaskRecord:
        """A copy without the in-memory links, as the journal writes it."""
        return msgspec.structs.replace(self, line=None, final=None)

    def encoded_size(self) -> int:
        """About what keeping it costs, in bytes: its encoded result (and arguments, when
        kept) and error texts, plus a fixed amount for the rest. Its ``final`` shares
        these with it, so they count once. Cheap: only the variable parts are encoded."""
        size = _RECORD_BYTES + len(self.id) + len(self.name)
        if self.result is not None:
            size += len(_encoder.encode(self.result))
        if self.arguments_kept:
            size += len(_encoder.encode(self.args)) + len(_encoder.encode(self.kwargs))
        for error in (self.error, *self.attempt_errors):
            if error is not None:
                size += len(error.type) + len(error.message) + len(error.traceback)
        return size

    def drop_arguments(self) -> None:
        """Let go of the arguments of a final task: it never runs again, so they only cost
        memory (a 16 MB argument per cached result adds up)."""
        self.args, self.kwargs = [], {}
        self.arguments_kept = False

    def apply(self, event: TaskEvent) -> TaskState:
        """Move along the transition table; raises ``InvalidTransition`` if not allowed."""
        self.state = next_task_state(self.state, event)
        return self.state

    def assignment(self) -> Assignment:
        return Assignment(
            id=self.id,
            name=self.name,
            args=self.args,
            kwargs=self.kwargs,
            headers=self.headers,
            attempt=self.attempts,
            time_limit=self.time_limit,
            priority=self.priority,
            queue=self.queue,
            eta=self.eta,
        )

    def snapshot(self) -> TaskResult:
        return TaskResult(
            task_id=self.id,
            name=self.name,
            status=self.state,
            priority=self.priority,
            result=self.result,
            error=self.error,
            attempts=self.attempts,
            worker_id=self.worker_id,
            submitted_at=self.submitted_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            eta=self.eta,
            attempt_errors=list(self.attempt_errors),
            queue=self.queue,
            retry_of=self.retry_of,
        )
