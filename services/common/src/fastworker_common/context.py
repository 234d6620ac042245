"""``current_task()``: what a running task may know about itself.

The subworker sets the running task's assignment in a context variable around each call
(on its event loop, on a thread, or in a child process), so each task sees its own, and
code called from it (helpers, logging processors) sees it too. The ``TaskContext`` is
built only when asked for: a task that never asks pays one ``ContextVar.set``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass

from fastworker_protocol import Assignment, Priority

_running: ContextVar[Assignment | None] = ContextVar("fastworker_task", default=None)


@dataclass(frozen=True)
class TaskContext:
    """The attempt of a task that is running now.

    ``attempt`` counts from 1: retries after failures and redeliveries after a lost
    subworker each add one. Key side effects on ``id`` (the same for every attempt).
    """

    id: str
    name: str
    attempt: int
    priority: Priority | None
    queue: str
    eta: float | None  # when it was due, if it was delayed (Unix seconds)
    headers: Mapping[str, str]


def current_task() -> TaskContext | None:
    """The task running in this context, or ``None`` outside one (as when a ``@task``
    function is called directly, like a plain function)."""
    assignment = _running.get()
    if assignment is None:
        return None
    return TaskContext(
        id=assignment.id,
        name=assignment.name,
        attempt=assignment.attempt,
        priority=assignment.priority,
        queue=assignment.queue,
        eta=assignment.eta,
        headers=dict(assignment.headers),
    )


def enter(assignment: Assignment) -> Token[Assignment | None]:
    """Make ``assignment`` the current task (the subworker, just before calling it)."""
    return _running.set(assignment)


def leave(token: Token[Assignment | None]) -> None:
    """Undo ``enter`` (the subworker, once the call has returned or raised)."""
    _running.reset(token)
