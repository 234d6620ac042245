"""Whether one submitted task can be accepted at all: it fits a dispatch message, a
registered task has its name, and its arguments bind to that task's signature."""

from __future__ import annotations

from fastworker_control_plane.core.arguments import ArgumentChecker
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import ErrorCode, TaskSpec


def refusal(
    index: int,
    spec: TaskSpec,
    size: int,
    checker: ArgumentChecker | None,
    *,
    max_bytes: int,
    max_message_size: int,
) -> Rejected | None:
    """Why the ``index``-th task of a submission (``size`` bytes encoded) is refused, or
    ``None`` if it is acceptable."""
    if size > max_bytes:
        return Rejected(
            ErrorCode.OVERSIZE,
            f"task of {size} bytes cannot be dispatched in a {max_message_size}-byte message",
            index=index,
            task_name=spec.name,
        )
    if checker is None:
        return Rejected(
            ErrorCode.UNKNOWN_TASK,
            f"no subworker has registered a task named {spec.name!r}",
            index=index,
            task_name=spec.name,
        )
    problem = checker.problem(spec.args, spec.kwargs)
    if problem is not None:
        return Rejected(ErrorCode.INVALID_ARGUMENTS, problem, index=index, task_name=spec.name)
    return None
