"""Compiling a canvas to a ``SubmitWorkflow``: steps, who they wait for, what they are fed.

Pure: no I/O, no clock, no random ids (an empty ``workflow_id`` is left empty; the client
fills it before sending, so that its own retries are idempotent).

An item is *placed* after what came before it, as an :class:`Out`: the steps to wait for
(its exits, in result order) and the value they leave. Each composite in ``canvas.py``
places its parts in turn; only a :class:`Builder` makes steps. A step placed after an
``Out`` waits for its exits and, unless immutable, is fed its value: a single result
(``feed="one"``), the list of several (``"all"``) or, after an empty group, the constant
``[]`` put before its arguments. A value that cannot be written as a feed (a group whose
member itself ends in a group would need a nested list) is carried as ``problem`` and is
an error only if something mutable is fed it.

Never import the subworker or the control plane from here (the SDK stands alone).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from fastworker._calls import check_arguments, priority_of
from fastworker.errors import InvalidArguments
from fastworker_protocol import ErrorCode, TaskSpec
from fastworker_protocol.workflows import (
    MAX_PARENTS,
    MAX_STEPS,
    Feed,
    OnFailure,
    SubmitWorkflow,
    WorkflowStep,
)

if TYPE_CHECKING:
    from fastworker.canvas import Signature


class Value(Enum):
    """What the exits of a placed item leave for the item after it."""

    ONE = "one"  # the result of its only exit
    ALL = "all"  # the list of its exits' results, in exit order
    EMPTY = "empty"  # the empty list (an empty group): the exits are only waited for
    NONE = "none"  # nothing (a DAG step's parents, unless it asks): only waited for


Shape = int | tuple["Shape", ...]
"""Where the value an item leaves comes from: one step's result (the step's index), or a
list of such values, nested as the items are (a group of chains ending in groups...)."""


@dataclass(frozen=True)
class Out:
    """A placed item, as the next one sees it."""

    exits: tuple[int, ...]  # steps to wait for, in result order
    value: Value
    problem: str | None = None  # why its value cannot be fed to a step, if it cannot
    shape: Shape | None = None  # where its value comes from (None: it leaves none)


def waited_for(exits: Iterable[int]) -> Out:
    """Steps to wait for, feeding nothing (each once, in first-seen order)."""
    return Out(tuple(dict.fromkeys(exits)), Value.NONE)


def as_list(outs: Sequence[Out], describe: Callable[[int], str]) -> Out:
    """The list of the values of ``outs`` (a group, or a DAG step's parents): each must be
    one result, since a feed is a flat list; ``describe(i)`` names part ``i`` in errors."""
    exits = tuple(e for out in outs for e in out.exits)
    parts = [out.shape for out in outs]
    shape = None if None in parts else tuple(p for p in parts if p is not None)
    for i, out in enumerate(outs):
        if out.value is not Value.ONE:
            problem = (
                f"{describe(i)} leaves {_shape(out)}, which cannot be one item of a list of "
                "results (a feed is a flat list): end it with a single step, e.g. a chord "
                "callback that gathers its results"
            )
            return Out(exits, Value.ALL, problem, shape)
    return Out(exits, Value.ALL, shape=shape)


def _shape(out: Out) -> str:
    if out.value is Value.EMPTY:
        return "an empty list (an empty group)"
    if out.value is Value.NONE:
        return "no value"
    return "a list of results (it ends in a group, or a Workflow with several last steps)"


class _Fed:
    """Stands for the fed result when a task's parameters are checked."""

    def __repr__(self) -> str:
        return "<fed result>"


_FED = _Fed()


class Builder:
    """The steps of one workflow, made in index order; every check made as each is."""

    def __init__(self) -> None:
        self.steps: list[WorkflowStep] = []
        self._parameters: dict[Callable[..., Any], inspect.Signature] = {}
        self._open: list[int] = []  # ids of the Workflows being placed (a cycle guard)

    def step(self, signature: Signature, before: Out | None) -> Out:
        """Add ``signature`` as a step placed after ``before``; it is the one exit."""
        after, feed, lead = _feeding(signature, before)
        if len(self.steps) >= MAX_STEPS:
            raise ValueError(f"a workflow has at most {MAX_STEPS} steps")
        if len(after) > MAX_PARENTS:
            raise ValueError(
                f"{signature!r} would wait for {len(after)} steps: at most {MAX_PARENTS}"
            )
        fed = feed is not Feed.NONE
        spec = self.spec(signature, lead, fed=fed, hint=fed or bool(lead))
        priority = priority_of(signature.task, signature.priority)
        self.steps.append(WorkflowStep(task=spec, after=after, feed=feed, priority=priority))
        index = len(self.steps) - 1
        return Out((index,), Value.ONE, shape=index)

    def spec(self, signature: Signature, lead: Sequence[Any], *, fed: bool, hint: bool) -> TaskSpec:
        """The task of a step (its id left to the control plane), its arguments checked:
        ``fed`` counts a result put before them, ``lead`` is put there now."""
        task = signature.task
        name = task if isinstance(task, str) else task.name
        args, kwargs = check_arguments(name, [*lead, *signature.args], dict(signature.kwargs))
        queue = signature.queue
        if not isinstance(task, str):
            self._fit(task.fn, name, [_FED, *args] if fed else args, kwargs, hint)
            queue = queue or task.queue
        return TaskSpec(
            name=name,
            args=args,
            kwargs=kwargs,
            max_retries=signature.max_retries,
            time_limit=signature.time_limit,
            queue=queue,
        )

    def _fit(
        self, fn: Callable[..., Any], name: str, args: list[Any], kwargs: Any, hint: bool
    ) -> None:
        parameters = self._parameters.get(fn)
        if parameters is None:
            parameters = self._parameters[fn] = inspect.signature(fn)
        try:
            parameters.bind(*args, **kwargs)
        except TypeError as exc:
            why = f"{name}(): {exc}"
            if hint:
                why += (
                    " (counting the result it is fed as its first argument: "
                    "make it immutable, .si(), to feed it nothing)"
                )
            raise InvalidArguments(ErrorCode.INVALID_ARGUMENTS, why) from None

    @contextmanager
    def placing(self, workflow: object) -> Iterator[None]:
        """Around the placing of a ``Workflow``: one that contains itself is refused."""
        if id(workflow) in self._open:
            raise ValueError("a Workflow contains itself (through the items added to it)")
        self._open.append(id(workflow))
        try:
            yield
        finally:
            self._open.pop()

    def callback(self, signature: object, what: str) -> TaskSpec:
        """A ``link``/``link_error`` task: always fed (the results, or the workflow id)."""
        from fastworker.canvas import Signature

        if not isinstance(signature, Signature):
            raise TypeError(f"{what} takes signatures (a task each), not {signature!r}")
        if signature.immutable:
            raise ValueError(
                f"{what}={signature!r}: a {what} task is always fed (the workflow's results, "
                "or for link_error its id) as its first argument; use .s(), not .si()"
            )
        if signature.priority is not None:
            raise ValueError(
                f"{what}={signature!r}: a {what} task has no priority of its own in the "
                "workflow contract; leave priority unset"
            )
        return self.spec(signature, (), fed=True, hint=True)

    def message(
        self,
        workflow_id: str,
        on_failure: OnFailure | str,
        link: Sequence[TaskSpec],
        link_error: Sequence[TaskSpec],
    ) -> SubmitWorkflow:
        if not self.steps:
            raise ValueError("nothing to run: the workflow has no step (only empty groups)")
        if not isinstance(workflow_id, str):
            raise TypeError(f"workflow_id must be a str, not {workflow_id!r}")
        return SubmitWorkflow(
            steps=self.steps,
            workflow_id=workflow_id,
            on_failure=_on_failure(on_failure),
            link=list(link),
            link_error=list(link_error),
        )


def _feeding(signature: Signature, before: Out | None) -> tuple[list[int], Feed, tuple[Any, ...]]:
    """A step's parents, its feed, and the constant put before its arguments."""
    if before is None:
        return [], Feed.NONE, ()
    if signature.immutable or before.value is Value.NONE:
        return list(dict.fromkeys(before.exits)), Feed.NONE, ()
    if before.problem is not None:
        raise ValueError(f"{signature!r} cannot be fed what runs before it: {before.problem}")
    if before.value is Value.EMPTY:
        return list(dict.fromkeys(before.exits)), Feed.NONE, ([],)
    feed = Feed.ONE if before.value is Value.ONE else Feed.ALL
    return list(before.exits), feed, ()


def _on_failure(value: OnFailure | str) -> OnFailure:
    try:
        return OnFailure(value)
    except ValueError:
        choices = ", ".join(repr(c.value) for c in OnFailure)
        raise ValueError(f"on_failure must be one of {choices}, not {value!r}") from None
