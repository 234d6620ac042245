"""One workflow's progress: which steps wait, run, ended or were skipped, and the results
still needed. Pure: events in (a step ended, a link ended, cancel), what to do out.

The rules:

* A step is released (queued) the moment its last parent succeeds; roots at once. Each
  step is released at most once, and only after all its parents succeeded.
* A released step ends success, failure or cancelled (a cancelled step counts as failed).
  Results of steps that are not released are ignored (they are not this workflow's).
* A step's result is kept while a consumer still needs it: a child fed from it that has
  not ended (kept until it ended, not only released, so that a restarted control plane
  can queue it again with the same arguments), and, for a final step (one no step runs
  after) of a workflow with ``link`` tasks, until those links have ended.
* A failure with ``on_failure="cancel"`` ends the workflow at once: released steps are
  to be cancelled, waiting ones are skipped. With ``"continue"`` the failed step's
  descendants are skipped, and the workflow ends once no step is waiting or released.
* The workflow ends ``success`` if every step succeeded, else ``failure``; ``cancel``
  ends it ``cancelled``. Ending queues ``link`` tasks (success: fed the list of the final
  steps' results, in index order) or ``link_error`` tasks (failure: fed the workflow id);
  a cancelled workflow queues neither.
* Once ended, nothing more is released; late results only update step states.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec

from fastworker_control_plane.core.workflow_records import (
    LINK,
    LINK_ERROR,
    WorkflowDefined,
    WorkflowProgress,
    link_id,
    step_id,
)
from fastworker_protocol import Priority, TaskSpec, TaskState
from fastworker_protocol.workflows import (
    Feed,
    OnFailure,
    StepInfo,
    StepState,
    WorkflowInfo,
    WorkflowState,
    WorkflowStep,
)

WAITING, RELEASED, SUCCESS, FAILURE, CANCELLED, SKIPPED = b"wrsfck"
_ENDED = {TaskState.SUCCESS: SUCCESS, TaskState.FAILURE: FAILURE, TaskState.CANCELLED: CANCELLED}
_STATES: dict[int, TaskState | StepState] = {
    WAITING: StepState.WAITING,
    SKIPPED: StepState.SKIPPED,
    SUCCESS: TaskState.SUCCESS,
    FAILURE: TaskState.FAILURE,
    CANCELLED: TaskState.CANCELLED,
}
_OPEN = (WAITING, RELEASED)
_RUNNING = WorkflowState.RUNNING

# Estimated bytes beyond the encoded arguments and results (for the book's bounds).
FLOW_BYTES = 1024
STEP_BYTES = 96
KEPT_BYTES = 64
_encoder = msgspec.msgpack.Encoder()

Lookup = Callable[[str], TaskState | None]
Release = tuple[TaskSpec, Priority]


class _Kept(NamedTuple):
    value: Any
    size: int


@dataclass
class Steps:
    """What an event asks of the caller: tasks to queue, released tasks to cancel."""

    release: list[Release] = field(default_factory=list)
    cancel: list[str] = field(default_factory=list)


class Flow:
    __slots__ = (
        "_child_at",
        "_children",
        "_need",
        "_pending",
        "bytes",
        "codes",
        "finished_at",
        "id",
        "link",
        "link_error",
        "links_open",
        "on_failure",
        "open",
        "results",
        "state",
        "steps",
        "submitted_at",
    )

    def __init__(self, defined: WorkflowDefined) -> None:
        self.id = defined.workflow_id
        self.submitted_at = defined.submitted_at
        self.on_failure = defined.on_failure
        self.steps = list(defined.steps)  # a copy: finished steps are slimmed in place
        self.link = defined.link
        self.link_error = defined.link_error
        self.state = WorkflowState.RUNNING
        self.finished_at: float | None = None
        self.results: dict[int, _Kept] = {}
        self.links_open: set[str] = set()
        count = len(self.steps)
        self.codes = bytearray([WAITING]) * count
        self.open = count  # steps waiting or released
        self._pending = array("q", (len(step.after) for step in self.steps))
        self._child_at, self._children = _children(self.steps)
        self._need = array("q", bytes(8 * count))
        self._count_needs()
        self.bytes = FLOW_BYTES + sum(_step_bytes(step) for step in self.steps)
        self.bytes += sum(STEP_BYTES + _argument_bytes(s) for s in (*self.link, *self.link_error))

    @property
    def running(self) -> bool:
        return self.state is _RUNNING

    def task_ids(self) -> list[str]:
        return [step_id(self.id, i) for i in range(len(self.steps))]

    def children(self, index: int) -> array[int]:
        return self._children[self._child_at[index] : self._child_at[index + 1]]

    def sinks(self) -> list[int]:
        at = self._child_at
        return [i for i in range(len(self.steps)) if at[i] == at[i + 1]]

    # --- events --------------------------------------------------------------------------

    def start(self) -> list[Release]:
        """Release the roots (once, when the workflow is accepted)."""
        return [self._release(i) for i in range(len(self.steps)) if not self.steps[i].after]

    def step_ended(self, index: int, state: TaskState, result: Any, now: float) -> Steps | None:
        """Step ``index`` ended ``state`` (final) with ``result``; ``None`` if that changes
        nothing (the step was not released, or had ended already)."""
        if self.codes[index] != RELEASED or state not in _ENDED:
            return None
        self.codes[index] = _ENDED[state]
        self.open -= 1
        self._close(index)
        steps = Steps()
        if not self.running:
            return steps
        if state == TaskState.SUCCESS:
            if self._need[index] > 0:
                self._keep(index, result)
            for child in self.children(index):
                self._pending[child] -= 1
                if not self._pending[child] and self.codes[child] == WAITING:
                    steps.release.append(self._release(child))
        elif self.on_failure == OnFailure.CANCEL:
            return self._end(WorkflowState.FAILURE, now)
        else:
            self._skip_descendants(index)
        if not self.open:
            failed = any(code != SUCCESS for code in self.codes)
            ended = self._end(WorkflowState.FAILURE if failed else WorkflowState.SUCCESS, now)
            steps.release += ended.release
        return steps

    def link_ended(self, task_id: str) -> bool:
        if task_id not in self.links_open:
            return False
        self.links_open.discard(task_id)
        if not self.links_open:
            self._drop_results()
        return True

    def cancel(self, now: float) -> Steps | None:
        """End a running workflow ``cancelled``; ``None`` if it had ended already."""
        return self._end(WorkflowState.CANCELLED, now) if self.running else None

    def outstanding(self) -> Steps:
        """Everything this workflow asked for that may not have been done: released steps
        queued again (or cancelled, once the workflow ended) and open links queued again.
        Each has its deterministic id, so doing it twice is harmless."""
        steps = Steps()
        for index, code in enumerate(self.codes):
            if code == RELEASED:
                if self.running:
                    steps.release.append(self._release(index))
                else:
                    steps.cancel.append(step_id(self.id, index))
        if self.links_open:
            steps.release += [r for r in self._links() if r[0].id in self.links_open]
        return steps

    # --- durability ----------------------------------------------------------------------

    def defined(self) -> WorkflowDefined:
        return WorkflowDefined(
            workflow_id=self.id,
            submitted_at=self.submitted_at,
            steps=list(self.steps),
            on_failure=self.on_failure,
            link=self.link,
            link_error=self.link_error,
        )

    def progress(self) -> WorkflowProgress:
        return WorkflowProgress(
            workflow_id=self.id,
            steps=self.codes.decode("ascii"),
            state=self.state,
            finished_at=self.finished_at,
            results={i: kept.value for i, kept in sorted(self.results.items())},
            links_open=sorted(self.links_open),
        )

    def load(self, progress: WorkflowProgress) -> None:
        """Take the state ``progress`` describes (this flow was just made from its
        ``WorkflowDefined``); what follows from it (counters, needs) is derived again."""
        self.codes = bytearray(progress.steps.encode("ascii"))
        self.state = progress.state
        self.finished_at = progress.finished_at
        self.links_open = set(progress.links_open)
        self.open = sum(1 for code in self.codes if code in _OPEN)
        for index, step in enumerate(self.steps):
            self._pending[index] = sum(1 for p in step.after if self.codes[p] != SUCCESS)
        self._count_needs()
        self._drop_results()
        for index, value in progress.results.items():
            self._keep(index, value)

    def info(self, lookup: Lookup | None = None) -> WorkflowInfo:
        steps = []
        for index, (step, code) in enumerate(zip(self.steps, self.codes, strict=True)):
            task_id = step_id(self.id, index)
            state = _STATES.get(code)
            if state is None:  # released: the board knows how far it got
                state = (lookup(task_id) if lookup else None) or TaskState.QUEUED
            steps.append(
                StepInfo(
                    task_id=task_id, name=step.task.name, state=StepState(state), after=step.after
                )
            )
        return WorkflowInfo(
            workflow_id=self.id,
            state=self.state,
            steps=steps,
            on_failure=self.on_failure,
            submitted_at=self.submitted_at,
            finished_at=self.finished_at,
        )

    # --- the parts ----------------------------------------------------------------------

    def _release(self, index: int) -> Release:
        self.codes[index] = RELEASED
        step = self.steps[index]
        spec = step.task
        if step.feed == Feed.ONE:
            fed = [self.results[step.after[0]].value, *spec.args]
        elif step.feed == Feed.ALL:
            fed = [[self.results[p].value for p in step.after], *spec.args]
        else:
            fed = spec.args
        return msgspec.structs.replace(spec, id=step_id(self.id, index), args=fed), step.priority

    def _close(self, index: int) -> None:
        """Step ``index`` ended or was skipped: its own arguments are let go (it never runs
        again) and its parents' results are needed by one consumer less."""
        step = self.steps[index]
        if step.task.args or step.task.kwargs or step.task.headers:
            self.bytes -= _argument_bytes(step.task)
            task = msgspec.structs.replace(step.task, args=[], kwargs={}, headers={})
            self.steps[index] = step = msgspec.structs.replace(step, task=task)
        if step.feed != Feed.NONE:
            for parent in step.after:
                self._need[parent] -= 1
                if self._need[parent] <= 0:
                    self._drop(parent)

    def _skip(self, index: int) -> None:
        self.codes[index] = SKIPPED
        self.open -= 1
        self._close(index)

    def _skip_descendants(self, index: int) -> None:
        stack = [index]
        while stack:
            for child in self.children(stack.pop()):
                if self.codes[child] == WAITING:  # never released: a parent never succeeded
                    self._skip(child)
                    stack.append(child)

    def _end(self, state: WorkflowState, now: float) -> Steps:
        self.state, self.finished_at = state, now
        steps = Steps()
        for index, code in enumerate(self.codes):
            if code == RELEASED:
                steps.cancel.append(step_id(self.id, index))
            elif code == WAITING:
                self._skip(index)
        steps.release = self._links()
        self.links_open = {spec.id for spec, _ in steps.release}
        if not (state == WorkflowState.SUCCESS and self.links_open):
            self._drop_results()
        return steps

    def _links(self) -> list[Release]:
        """The link (success) or link_error (failure) tasks this workflow's end queues."""
        if self.state == WorkflowState.SUCCESS and self.link:
            fed: Any = [self.results[i].value for i in self.sinks()]
            return [self._link(LINK, k, spec, fed) for k, spec in enumerate(self.link)]
        if self.state == WorkflowState.FAILURE:
            return [self._link(LINK_ERROR, k, s, self.id) for k, s in enumerate(self.link_error)]
        return []

    def _link(self, kind: str, index: int, spec: TaskSpec, fed: Any) -> Release:
        spec = msgspec.structs.replace(
            spec, id=link_id(self.id, kind, index), args=[fed, *spec.args]
        )
        return spec, Priority.NORMAL

    def _count_needs(self) -> None:
        """How many consumers each step's result has that have not ended: children fed
        from it, and for a final step, the workflow's links until they ended."""
        need = self._need
        for index in range(len(need)):
            need[index] = 0
        for step, code in zip(self.steps, self.codes, strict=True):
            if step.feed != Feed.NONE and code in _OPEN:
                for parent in step.after:
                    need[parent] += 1
        if self.link and (self.running or self.links_open):
            for sink in self.sinks():
                need[sink] += 1

    def _keep(self, index: int, value: Any) -> None:
        try:
            size = len(_encoder.encode(value)) + KEPT_BYTES
        except (TypeError, RecursionError, OverflowError):  # came from msgpack: unexpected
            size = KEPT_BYTES
        self._drop(index)
        self.results[index] = _Kept(value, size)
        self.bytes += size

    def _drop(self, index: int) -> None:
        kept = self.results.pop(index, None)
        if kept is not None:
            self.bytes -= kept.size

    def _drop_results(self) -> None:
        for index in list(self.results):
            self._drop(index)


def _children(steps: list[WorkflowStep]) -> tuple[array[int], array[int]]:
    """Each step's children, packed: step ``i``'s are ``children[at[i]:at[i + 1]]``, in
    index order."""
    count = len(steps)
    at = array("q", bytes(8 * (count + 1)))
    for step in steps:
        for parent in step.after:
            at[parent + 1] += 1
    for index in range(count):
        at[index + 1] += at[index]
    children = array("q", bytes(8 * at[count]))
    filled = array("q", at[:count])
    for child, step in enumerate(steps):
        for parent in step.after:
            children[filled[parent]] = child
            filled[parent] += 1
    return at, children


def _step_bytes(step: WorkflowStep) -> int:
    return STEP_BYTES + len(step.task.name) + 8 * len(step.after) + _argument_bytes(step.task)


def _argument_bytes(task: TaskSpec) -> int:
    """What a step's arguments (and headers) add, let go once it has ended."""
    if not (task.args or task.kwargs or task.headers):
        return 0
    encode = _encoder.encode
    return len(encode(task.args)) + len(encode(task.kwargs)) + len(encode(task.headers))
