"""Whether one submitted task can be accepted at all: its arguments nest no deeper than
the protocol allows, it fits a dispatch message, a registered task has its name, and its
arguments bind to that task's signature."""

from __future__ import annotations

from fastworker_control_plane.core.arguments import ArgumentChecker
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import MAX_NESTING, ErrorCode, Priority, TaskSpec, nesting_depth


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
    if (problem := _too_deep(spec)) is not None:
        # First: such a task could be accepted, then fail to encode in the journal, the
        # dashboard or an ``assign`` (encoders recurse), and its size is not even known.
        return Rejected(ErrorCode.INVALID_ARGUMENTS, problem, index=index, task_name=spec.name)
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


def queue_full(
    priority: Priority, live: int, new: int, bound: int, index: int | None = None
) -> Rejected | None:
    """``queue_full`` if ``new`` more tasks would take the priority's ``live`` tasks past
    its ``bound``."""
    if live + new <= bound:
        return None
    return Rejected(
        ErrorCode.QUEUE_FULL,
        f"the {priority} queue is full ({live} live tasks, bound {bound}): "
        "retry later or at another priority",
        index=index,
        priority=str(priority),
        live=live,
        bound=bound,
    )


def _too_deep(spec: TaskSpec) -> str | None:
    for name, value in (("args", spec.args), ("kwargs", spec.kwargs)):
        if value and nesting_depth(value, MAX_NESTING) > MAX_NESTING:  # empty: depth 1
            return (
                f"{spec.name}(): {name} nest more than {MAX_NESTING} arrays and maps deep "
                f"(the {name} {'array' if name == 'args' else 'map'} itself counting as one)"
            )
    return None
