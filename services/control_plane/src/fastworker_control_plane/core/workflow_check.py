"""Whether a submitted workflow can be accepted, decided before any of it is: its shape
(steps, parents, feeds, an acyclic graph, the limits) and every task it names (registered,
arguments fitting the signature once the fed argument is counted). Pure; raises
``Rejected`` naming the step (``index``) or link it is about. ``named`` first puts each
task under the registered name it stands for (``add`` for ``app.tasks.add``).

Codes: ``invalid_message`` for the shape, ``unknown_task`` for a name no subworker
registered, ``invalid_arguments`` (or ``oversize``) for a task's arguments, as for a task
submitted alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from fastworker_control_plane.core.admission import refusal
from fastworker_control_plane.core.board_types import BoardConfig, task_size
from fastworker_control_plane.core.catalog import Catalog
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import ErrorCode, TaskSpec
from fastworker_protocol.workflows import (
    MAX_EDGES,
    MAX_LINKS,
    MAX_PARENTS,
    MAX_STEPS,
    Feed,
    SubmitWorkflow,
    WorkflowStep,
)

_FED = {
    Feed.ONE: "its parent's result",
    Feed.ALL: "the list of its parents' results",
}


def check(submit: SubmitWorkflow, catalog: Catalog, config: BoardConfig | None = None) -> None:
    """Raise ``Rejected`` unless every part of ``submit`` can be accepted."""
    check_shape(submit)
    config = config or BoardConfig()
    for index, step in enumerate(submit.steps):
        fed = _FED.get(step.feed)
        _check_task(step.task, catalog, config, fed, f"step {index}", index=index)
    for kind, specs, fed in (
        ("link", submit.link, "the list of the final steps' results"),
        ("link_error", submit.link_error, "the workflow id"),
    ):
        for index, spec in enumerate(specs):
            _check_task(spec, catalog, config, fed, f"{kind} {index}", **{kind: index})


def named(submit: SubmitWorkflow, catalog: Catalog) -> SubmitWorkflow:
    """``submit`` with each task under the registered name it stands for
    (``Catalog.resolve``), so its steps run, and are reported, under their full names;
    raises ``Rejected`` (``unknown_task``) naming the first step or link whose name is
    ambiguous. A name that stands for none is left for ``check`` to refuse."""

    def spec_named(spec: TaskSpec, where: str, index: int | None = None, **at: int) -> TaskSpec:
        try:
            return catalog.named(spec)
        except Rejected as ambiguous:
            message = f"{where}: {ambiguous.message}"
            raise Rejected(ambiguous.code, message, index=index, **ambiguous.detail, **at) from None

    steps = [
        msgspec.structs.replace(step, task=spec_named(step.task, f"step {i}", index=i))
        for i, step in enumerate(submit.steps)
    ]
    link = [spec_named(s, f"link {i}", link=i) for i, s in enumerate(submit.link)]
    errors = [
        spec_named(s, f"link_error {i}", link_error=i) for i, s in enumerate(submit.link_error)
    ]
    return msgspec.structs.replace(submit, steps=steps, link=link, link_error=errors)


def check_shape(submit: SubmitWorkflow) -> None:
    """Everything ``check`` decides without the registered tasks: what the workflow book
    relies on to run a workflow (``accept`` checks it again)."""
    steps = submit.steps
    if not steps:
        raise _invalid("a workflow needs at least one step")
    if len(steps) > MAX_STEPS:
        raise _invalid(f"a workflow has at most {MAX_STEPS} steps, not {len(steps)}")
    links = len(submit.link) + len(submit.link_error)
    if links > MAX_LINKS:
        raise _invalid(f"a workflow has at most {MAX_LINKS} link and link_error tasks, not {links}")
    edges = 0
    for index, step in enumerate(steps):
        _check_step(index, step, len(steps))
        edges += len(step.after)
        if edges > MAX_EDGES:
            raise _invalid(f"a workflow's steps have at most {MAX_EDGES} parents in all")
    for kind, specs in (("link", submit.link), ("link_error", submit.link_error)):
        for index, spec in enumerate(specs):
            _check_naming(spec, f"{kind} {index}", None)
    cycle = find_cycle([step.after for step in steps])
    if cycle:
        path = " -> ".join(str(i) for i in (*cycle, cycle[0]))
        raise _invalid(f"steps {path} form a cycle: none of them could ever run", cycle=cycle)


def _check_step(index: int, step: WorkflowStep, count: int) -> None:
    where = f"step {index}"
    _check_naming(step.task, where, index)
    after = step.after
    if len(after) > MAX_PARENTS:
        raise _invalid(f"{where} runs after {len(after)} steps (at most {MAX_PARENTS})", index)
    seen: set[int] = set()
    for parent in after:
        if not 0 <= parent < count:
            raise _invalid(
                f"{where} runs after step {parent}, which does not exist (0 to {count - 1})",
                index,
            )
        if parent == index:
            raise _invalid(f"{where} runs after itself", index)
        if parent in seen:
            raise _invalid(f"{where} names step {parent} twice in after", index)
        seen.add(parent)
    if step.feed == Feed.ONE and len(after) != 1:
        raise _invalid(
            f"{where} is fed its parent's result (feed=one) but runs after {len(after)} steps",
            index,
        )
    if step.feed == Feed.ALL and not after:
        raise _invalid(f"{where} is fed its parents' results (feed=all) but has no parents", index)


def _check_naming(spec: TaskSpec, where: str, index: int | None) -> None:
    if spec.id:
        raise _invalid(f"{where}: its task id is given by the control plane; leave it empty", index)
    if spec.idempotency_key is not None:
        raise _invalid(
            f"{where}: a workflow's tasks take no idempotency_key "
            "(resubmitting the workflow with its id is idempotent)",
            index,
        )


def _check_task(
    spec: TaskSpec,
    catalog: Catalog,
    config: BoardConfig,
    fed: str | None,
    where: str,
    index: int | None = None,
    **detail: object,
) -> None:
    # The fed argument is not known yet: a placeholder stands for it in the signature.
    if fed is not None:
        spec = msgspec.structs.replace(spec, args=[None, *spec.args])
    rejected = refusal(
        0,
        spec,
        task_size(spec),
        catalog.checkers.get(spec.name),
        max_bytes=config.max_batch_bytes,
        max_message_size=config.max_message_size,
    )
    if rejected is None:
        return
    message = f"{where}: {rejected.message}"
    if fed is not None and rejected.code == ErrorCode.INVALID_ARGUMENTS:
        message += f" (its first positional argument is {fed})"
    raise Rejected(rejected.code, message, index=index, task_name=spec.name, **detail)


def find_cycle(parents: Sequence[Sequence[int]]) -> list[int]:
    """Step indices forming a cycle, from its lowest, each running after the one before
    it (and the first after the last); empty if the graph is acyclic. Indices must be in
    range."""
    count = len(parents)
    children: list[list[int]] = [[] for _ in range(count)]
    waiting = [len(after) for after in parents]
    for child, after in enumerate(parents):
        for parent in after:
            children[parent].append(child)
    ready = [i for i in range(count) if not waiting[i]]
    while ready:  # Kahn: what is left once nothing is ready lies on or after a cycle
        for child in children[ready.pop()]:
            waiting[child] -= 1
            if not waiting[child]:
                ready.append(child)
    left = next((i for i in range(count) if waiting[i]), None)
    if left is None:
        return []
    # Each step left has a parent left: walk up parents until one repeats.
    path: list[int] = []
    where: dict[int, int] = {}
    step = left
    while step not in where:
        where[step] = len(path)
        path.append(step)
        step = next(p for p in parents[step] if waiting[p])
    cycle = path[where[step] :][::-1]
    first = cycle.index(min(cycle))  # told from its lowest step, for a stable message
    return cycle[first:] + cycle[:first]


def _invalid(message: str, index: int | None = None, **detail: object) -> Rejected:
    return Rejected(ErrorCode.INVALID_MESSAGE, message, index=index, **detail)
