"""The canvas: signatures, chains, groups, chords and DAGs, compiled to one workflow.

    add.s(2, 2) | mul.s(4)                    # chain: mul(add(2, 2), 4)
    group(add.s(i, i) for i in range(10))     # group: ten adds in parallel
    chord([fetch.s(u) for u in urls], merge.s())   # merge([fetch(u) for u in urls])
    wf = Workflow(); x = wf.add(a.s()); wf.add(b.s(), after=[x], feed="one")

**The value an item leaves.** A signature leaves its result. A chain leaves what its last
item leaves. A group leaves the list of its members' values, in member order, whatever
its size (a group of one leaves ``[r]``: a chord callback always gets a list, and the
shape of a data-driven group must not change with its length; Celery unrolls a group of
one in a chain, FastWorker does not). An empty group leaves ``[]`` (Celery: an empty
chord header calls its callback with ``[]``). A ``Workflow`` leaves what its last step
(the one no other step runs after) leaves when it has one, like a chain; with several, the
list of their values in the order they were added (the ``link`` tasks of a whole workflow
are always fed that list). A feed is a flat list, so a group member that
itself leaves a list (ends in a group) cannot be fed on: gather it first with a chord
callback. That is refused when compiling, and only when something mutable is fed it.

**Feeding.** An item placed after another runs once all of that one's last steps have
succeeded and its mutable entry steps get the value it left as their first positional
argument (Celery's chain). An immutable signature (``.si()``, or ``.set(immutable=True)``)
only waits. A ``Workflow``'s steps are fed nothing unless ``add`` asks with ``feed=``:
``"one"``, the value of its only parent; ``"all"``, the list of its parents' values in
``after`` order. A Workflow placed in a chain waits for what came before but feeds its
own entry steps nothing.

**Options.** A signature carries ``priority``, ``queue``, ``max_retries`` and
``time_limit`` (as the ``TaskSpec``'s), and ``immutable``. ``countdown`` and
``eta`` are refused: a step is queued when its parents succeed, so a time fixed when the
workflow is submitted means nothing for it, and the contract has no delay relative to
release. ``link=``/``link_error=`` are options of the whole workflow (``compile``), not of
a step. An empty chain is refused (it has no value to pass on).

Compiling (:meth:`Canvas.compile`) is pure: no I/O, and an empty ``workflow_id`` stays
empty. Composites are immutable; a ``Workflow`` is a builder, compiled as it is then. This
module must never import the subworker or the control plane.
"""

from __future__ import annotations

import reprlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from fastworker._canvas_compile import Builder, Out, Shape, Value, as_list, waited_for
from fastworker._task import Task
from fastworker_protocol import Priority, check_queue
from fastworker_protocol.workflows import Feed, OnFailure, SubmitWorkflow

if TYPE_CHECKING:
    from fastworker.handles import TaskHandle, WorkflowHandle

TaskRef = str | Task[..., Any]


class Canvas(ABC):
    """Anything that runs as (part of) a workflow. ``a | b`` is ``chain(a, b)``."""

    @abstractmethod
    def _place(self, builder: Builder, before: Out | None) -> Out:
        """Make this item's steps, placed after ``before``; what it leaves."""

    def compile(
        self,
        *,
        workflow_id: str = "",
        on_failure: OnFailure | str = OnFailure.CANCEL,
        link: Signature | Sequence[Signature] = (),
        link_error: Signature | Sequence[Signature] = (),
    ) -> SubmitWorkflow:
        """The ``SubmitWorkflow`` that runs this item, every argument checked.

        ``on_failure``: ``"cancel"`` (a failed step cancels what has not started) or
        ``"continue"`` (only its descendants). ``link`` tasks are queued once when the
        workflow succeeds, each fed the list of the results of its last steps; ``link_error``
        tasks once when it fails, each fed the workflow id."""
        return self.compile_with_shape(
            workflow_id=workflow_id, on_failure=on_failure, link=link, link_error=link_error
        )[0]

    def compile_with_shape(
        self,
        *,
        workflow_id: str = "",
        on_failure: OnFailure | str = OnFailure.CANCEL,
        link: Signature | Sequence[Signature] = (),
        link_error: Signature | Sequence[Signature] = (),
    ) -> tuple[SubmitWorkflow, Shape | None]:
        """:meth:`compile`, and where the value this item leaves comes from (the steps
        whose results make it), which a ``WorkflowHandle`` reads back."""
        builder = Builder()
        out = self._place(builder, None)
        links = [builder.callback(s, "link") for s in _signatures(link)]
        errors = [builder.callback(s, "link_error") for s in _signatures(link_error)]
        return builder.message(workflow_id, on_failure, links, errors), out.shape

    def delay(self, **options: Unpack[WorkflowOptions]) -> WorkflowHandle:
        """Submit this item as a workflow with the default client
        (:func:`fastworker.default_client`); its handle (``.get()`` is the value the
        workflow leaves). ``options`` are
        ``submit_workflow``'s: ``workflow_id``, ``on_failure``, ``link``, ``link_error``."""
        from fastworker._default import default_client  # the client imports this module

        return default_client().submit_workflow(self, **options)

    def apply_async(self, **options: Unpack[WorkflowOptions]) -> WorkflowHandle:
        """The same as :meth:`delay`."""
        return self.delay(**options)

    def __or__(self, other: Canvas) -> Chain:
        return chain(self, other)


class WorkflowOptions(TypedDict, total=False):
    """``submit_workflow``'s options, as ``delay`` takes them."""

    workflow_id: str | None
    on_failure: OnFailure | str
    link: Signature | Sequence[Signature] | None
    link_error: Signature | Sequence[Signature] | None


class Options(TypedDict, total=False):
    """A signature's options (``Signature.set``)."""

    priority: Priority | str | None
    queue: str | None
    max_retries: int | None
    time_limit: float | None
    immutable: bool


_OPTIONS = frozenset(Options.__annotations__)
_REFUSED = {
    "countdown": "a step is queued when its parents succeed; the contract has no delay "
    "relative to that, and an eta fixed at submission means nothing for a step",
    "eta": "a step is queued when its parents succeed; an eta fixed at submission means "
    "nothing for it",
    "link": "callbacks are options of the whole workflow (compile(link=...)); within "
    "it, put the task after this one in a chain",
    "link_error": "callbacks are options of the whole workflow (compile(link_error=...))",
    "task_id": "the control plane names steps <workflow_id>.<index>",
    "idempotency_key": "a workflow is made idempotent by its workflow_id",
}


@dataclass(frozen=True, init=False, repr=False)
class Signature(Canvas):
    """One task with its arguments and options, to run as a workflow step.

    ``task`` is a ``@task`` object (its arguments are then checked against its
    parameters when compiled, counting the result it is fed) or a task name (checked by
    the control plane). ``Signature(task, args, kwargs, **options)`` is the long form
    (for a task with a parameter named ``priority`` or ``queue``).
    """

    task: TaskRef
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    priority: Priority | None
    queue: str | None
    max_retries: int | None
    time_limit: float | None
    immutable: bool

    def __init__(
        self,
        task: TaskRef,
        args: Iterable[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Unpack[Options],
    ) -> None:
        if not isinstance(task, Task | str) or not task:
            raise TypeError(f"a signature needs a @task object or a task name, not {task!r}")
        _check_names(options)
        priority = options.get("priority")
        queue = options.get("queue")
        max_retries = options.get("max_retries")
        time_limit = options.get("time_limit")
        if max_retries is not None and max_retries < 0:
            raise ValueError("max_retries cannot be negative")
        if time_limit is not None and not time_limit > 0:
            raise ValueError("time_limit must be positive")
        init = object.__setattr__  # frozen: set once, here
        init(self, "task", task)
        init(self, "args", tuple(args))
        init(self, "kwargs", dict(kwargs or {}))
        init(self, "priority", None if priority is None else Priority.parse(priority))
        init(self, "queue", None if queue is None else check_queue(queue))
        init(self, "max_retries", max_retries)
        init(self, "time_limit", time_limit)
        init(self, "immutable", bool(options.get("immutable", False)))

    @property
    def name(self) -> str:
        return self.task if isinstance(self.task, str) else self.task.name

    def options(self) -> Options:
        """The options set on this signature (those left unset are absent)."""
        found: Options = {}
        if self.priority is not None:
            found["priority"] = self.priority
        if self.queue is not None:
            found["queue"] = self.queue
        if self.max_retries is not None:
            found["max_retries"] = self.max_retries
        if self.time_limit is not None:
            found["time_limit"] = self.time_limit
        if self.immutable:
            found["immutable"] = True
        return found

    def set(self, **options: Unpack[Options]) -> Signature:
        """A copy with ``options`` changed (``None`` unsets one). ``countdown``, ``eta``
        and per-step ``link`` are refused, with the reason."""
        _check_names(options)
        merged = self.options()
        merged.update(options)
        return Signature(self.task, self.args, self.kwargs, **merged)

    def delay(  # type: ignore[override]
        self, **options: Unpack[WorkflowOptions]
    ) -> TaskHandle[Any] | WorkflowHandle:
        """Queue this one task with the default client (``apply_async`` with its
        arguments and options) and return its handle; with ``submit_workflow``'s
        options (``link``...), submit it as a one-step workflow and return that one's."""
        if options:
            return super().delay(**options)
        from fastworker._default import default_client  # the client imports this module

        return default_client().apply_async(
            self.task,
            self.args,
            self.kwargs,
            priority=self.priority,
            queue=self.queue,
            max_retries=self.max_retries,
            time_limit=self.time_limit,
        )

    def _place(self, builder: Builder, before: Out | None) -> Out:
        return builder.step(self, before)

    def __repr__(self) -> str:
        call = _call(self.args, self.kwargs)
        options = self.options()
        if isinstance(self.task, str):
            head = f"sig({self.task!r}{', ' if call else ''}{call})"
        else:
            # as the code reads: the function's own name, not its module-qualified one
            head = f"{self.task.fn.__name__}.{'si' if self.immutable else 's'}({call})"
            options.pop("immutable", None)
        if self.priority is not None:
            options["priority"] = self.priority.value
        if not options:
            return head
        return f"{head}.set({_call((), options)})"


def sig(
    task: TaskRef,
    /,
    *args: Any,
    priority: Priority | str | None = None,
    queue: str | None = None,
    **kwargs: Any,
) -> Signature:
    """A signature by name (or object): ``sig("add", 2, 2, priority="high")``. ``priority``
    and ``queue`` are options, every other keyword is the task's; set the others with
    ``.set(...)``."""
    return Signature(task, args, kwargs, priority=priority, queue=queue)


@dataclass(frozen=True, repr=False)
class Chain(Canvas):
    """Items run one after the other, each fed what the one before left."""

    items: tuple[Canvas, ...]

    def _place(self, builder: Builder, before: Out | None) -> Out:
        out = before
        for item in self.items:
            out = item._place(builder, out)
        assert out is not None  # a chain has at least one item
        return out

    def __repr__(self) -> str:
        if len(self.items) == 1:
            return f"chain({self.items[0]!r})"
        return " | ".join(_listing(self.items))


@dataclass(frozen=True, repr=False)
class Group(Canvas):
    """Items run side by side, each fed what came before; leaves the list of their values."""

    items: tuple[Canvas, ...]

    def _place(self, builder: Builder, before: Out | None) -> Out:
        if not self.items:
            return Out(() if before is None else before.exits, Value.EMPTY, shape=())
        outs = [item._place(builder, before) for item in self.items]
        return as_list(outs, lambda i: f"group member {i} ({self.items[i]!r})")

    def __repr__(self) -> str:
        return f"group({', '.join(_listing(self.items))})"


@dataclass(frozen=True, repr=False)
class Chord(Canvas):
    """A group (``header``), then ``body`` fed the list of its results."""

    header: Group
    body: Canvas

    def _place(self, builder: Builder, before: Out | None) -> Out:
        return self.body._place(builder, self.header._place(builder, before))

    def __repr__(self) -> str:
        return f"chord([{', '.join(_listing(self.header.items))}], {self.body!r})"


def chain(*items: Canvas | Iterable[Canvas]) -> Chain:
    """``chain(a, b, c)`` (or ``chain([a, b, c])``): ``c(b(a()))``, unless immutable.
    Nested chains are flattened (the same thing)."""
    flat: list[Canvas] = []
    for item in _items(items, "chain"):
        flat.extend(item.items if isinstance(item, Chain) else (item,))
    if not flat:
        raise ValueError("chain() needs at least one item: an empty chain has no value")
    return Chain(tuple(flat))


def group(*items: Canvas | Iterable[Canvas]) -> Group:
    """``group(a, b, c)`` or ``group(iterable)``: run side by side; leaves ``[a, b, c]``."""
    return Group(_items(items, "group"))


def chord(header: Group | Iterable[Canvas], body: Canvas) -> Chord:
    """``chord([a, b], callback)``: the header side by side, then ``callback`` fed the
    list of their results, in header order (``[]`` for an empty header)."""
    if isinstance(header, Canvas) and not isinstance(header, Group):
        raise TypeError(f"a chord's header is a group or a list of items, not {header!r}")
    items = header if isinstance(header, Group) else group(header)
    (checked,) = _items((body,), "chord body")
    return Chord(items, checked)


@dataclass(frozen=True, eq=False)
class Step:
    """A handle on an item added to a ``Workflow``: pass it in ``after=``."""

    workflow: Workflow
    index: int
    item: Canvas

    def __repr__(self) -> str:
        return f"<step #{self.index} of Workflow at {id(self.workflow):#x}: {self.item!r}>"


@dataclass(frozen=True)
class _Node:
    item: Canvas
    after: tuple[int, ...]
    feed: Feed


class Workflow(Canvas):
    """A DAG: ``x = wf.add(a.s()); wf.add(b.s(), after=[x])``. Steps are added in order,
    each after steps already added, so it has no cycle; each is fed nothing unless
    ``feed`` asks (see ``add``)."""

    def __init__(self) -> None:
        self._nodes: list[_Node] = []

    def add(
        self,
        item: Canvas,
        after: Step | Iterable[Step] = (),
        feed: Feed | str = Feed.NONE,
    ) -> Step:
        """Add ``item`` (a signature, or any composite, even a Workflow) to run once every
        step in ``after`` has succeeded. ``feed``: ``"none"`` (default), nothing; ``"one"``,
        the value of its only parent as first argument; ``"all"``, the list of its
        parents' values, in ``after`` order."""
        (checked,) = _items((item,), "Workflow.add")
        if checked is self:
            raise ValueError("a Workflow cannot be added to itself")
        parents = self._parents(after)
        how = _feed(feed)
        if how is not Feed.NONE:
            if not parents or (how is Feed.ONE and len(parents) > 1):
                raise ValueError(
                    f"feed={how.value!r} needs {'one parent' if how is Feed.ONE else 'parents'}"
                    f" in after=, got {len(parents)}"
                )
            if isinstance(checked, Signature) and checked.immutable:
                raise ValueError(f"{checked!r} is immutable: it cannot be fed ({how.value!r})")
        self._nodes.append(_Node(checked, parents, how))
        return Step(self, len(self._nodes) - 1, checked)

    def _parents(self, after: Step | Iterable[Step]) -> tuple[int, ...]:
        steps = (after,) if isinstance(after, Step) else tuple(after)
        for step in steps:
            if not isinstance(step, Step):
                raise TypeError(f"after= takes steps returned by add(), not {step!r}")
            if step.workflow is not self:
                raise ValueError(f"{step!r} belongs to another Workflow")
        indices = tuple(step.index for step in steps)
        if len(set(indices)) != len(indices):
            raise ValueError("after= names a step twice")
        return indices

    def _place(self, builder: Builder, before: Out | None) -> Out:
        if not self._nodes:
            raise ValueError("an empty Workflow has nothing to run: add steps first")
        with builder.placing(self):
            outs: list[Out] = []
            for node in self._nodes:
                outs.append(node.item._place(builder, self._before(node, outs, before)))
        waited = {parent for node in self._nodes for parent in node.after}
        last = [i for i in range(len(self._nodes)) if i not in waited]
        if len(last) == 1:
            return outs[last[0]]
        return as_list([outs[i] for i in last], lambda i: f"last step #{last[i]}")

    @staticmethod
    def _before(node: _Node, outs: list[Out], before: Out | None) -> Out | None:
        if not node.after:
            return None if before is None else waited_for(before.exits)
        parents = [outs[i] for i in node.after]
        if node.feed is Feed.NONE:
            return waited_for(e for out in parents for e in out.exits)
        if node.feed is Feed.ONE:
            return parents[0]
        return as_list(parents, lambda i: f"parent #{node.after[i]}")

    def __repr__(self) -> str:
        nodes = [_node_repr(i, node) for i, node in enumerate(self._nodes)]
        return f"Workflow({'; '.join(_listing(nodes, str))})"


def _node_repr(index: int, node: _Node) -> str:
    text = f"#{index} {node.item!r}"
    if node.after:
        text += " after " + " ".join(f"#{i}" for i in node.after)
    if node.feed is not Feed.NONE:
        text += f" feed {node.feed.value}"
    return text


def _feed(value: Feed | str) -> Feed:
    try:
        return Feed(value)
    except ValueError:
        choices = ", ".join(repr(f.value) for f in Feed)
        raise ValueError(f"feed must be one of {choices}, not {value!r}") from None


def _items(parts: tuple[Canvas | Iterable[Canvas], ...], what: str) -> tuple[Canvas, ...]:
    """``parts``, or the items of its only element when that is an iterable of them."""
    if len(parts) == 1 and not isinstance(parts[0], Canvas | str | Task | Step):
        parts = tuple(parts[0])
    checked: list[Canvas] = []
    for part in parts:
        if isinstance(part, Canvas):
            checked.append(part)
            continue
        hint = ""
        if isinstance(part, Task):
            hint = f" (did you mean {part.fn.__name__}.s()?)"
        elif isinstance(part, Step):
            hint = " (a step handle goes in after=)"
        raise TypeError(f"{what}() takes signatures and composites, not {part!r}{hint}")
    return tuple(checked)


def _signatures(value: Signature | Sequence[Signature]) -> Sequence[object]:
    return [value] if isinstance(value, Signature) else list(value)


def _check_names(options: Mapping[str, Any]) -> None:
    for name in options:
        if name in _REFUSED:
            raise ValueError(f"{name} is not a workflow step option: {_REFUSED[name]}")
        if name not in _OPTIONS:
            known = ", ".join(sorted(_OPTIONS))
            raise TypeError(f"unknown signature option {name!r}: the options are {known}")


_ARGS = reprlib.Repr()
_ARGS.maxstring = _ARGS.maxother = 40


def _call(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    shown = [_ARGS.repr(a) for a in args]
    shown += [f"{k}={_ARGS.repr(v)}" for k, v in kwargs.items()]
    return ", ".join(shown)


def _listing(items: Sequence[Any], show: Callable[[Any], str] = repr, most: int = 8) -> list[str]:
    """The items shown, the middle of a long list elided (a chord of 1,000 stays readable)."""
    if len(items) <= most:
        return [show(item) for item in items]
    return [*(show(item) for item in items[:3]), f"...{len(items) - 4} more...", show(items[-1])]
