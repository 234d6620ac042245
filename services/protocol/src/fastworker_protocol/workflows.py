# msgspec inherits frozen=True from Record; mypy's dataclass model does not know that:
# mypy: disable-error-code="misc"
"""Workflows on the wire (issue 21): a graph of task steps the control plane runs.

``submit_workflow`` is served on every submission port, ``get_workflow`` and
``cancel_workflow`` on the results port (PROTOCOL.md, "Workflows").

A workflow is a list of steps. A step is a task (``TaskSpec``) plus the indices of the
steps it runs ``after`` (its parents) and what it is ``fed`` from them:

- ``none``: nothing (a DAG step that only waits for its parents);
- ``one``: its only parent's result, as its first positional argument (a chain);
- ``all``: the list of its parents' results, in ``after`` order, as its first positional
  argument (a chord's callback).

Step ``i``'s task id is ``"<workflow_id>.<i>"`` (deterministic: resubmitting a workflow
with the same id is idempotent, and a restarted control plane finds its steps). A step is
released (queued) once every parent has succeeded. A step that fails for good fails the
workflow: with ``on_failure="cancel"`` every step not started is cancelled; with
``"continue"`` only the failed step's descendants are, and independent branches finish.
``link`` tasks are queued once when the workflow succeeds (each fed the list of the
results of the steps no other step runs after, in index order), ``link_error`` tasks once
when it fails (each fed the workflow id). Both are at least once.
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

from fastworker_protocol.limits import Seconds
from fastworker_protocol.messages import Message, Record, TaskSpec
from fastworker_protocol.priority import Priority

MAX_STEPS = 50_000  # steps per workflow (a chord of 10,000 is 10,001; 50,000 fits 16 MiB)
MAX_PARENTS = 50_000  # parents of one step (a chord callback's fan-in)
MAX_EDGES = 1_000_000  # parent links summed over all steps (a full join of two groups of 1,000)
MAX_LINKS = 100  # link plus link_error tasks of one workflow


class Feed(StrEnum):
    NONE = "none"
    ONE = "one"
    ALL = "all"


class OnFailure(StrEnum):
    CANCEL = "cancel"
    CONTINUE = "continue"


class WorkflowState(StrEnum):
    RUNNING = "running"
    SUCCESS = "success"
    FAILURE = "failure"
    CANCELLED = "cancelled"


class StepState(StrEnum):
    """A step's state: ``waiting`` for its parents, ``skipped`` when it will never run (an
    ancestor failed, or the workflow was cancelled first), else its task's state (each
    ``TaskState`` value is here, and equal to it: ``StepState.SUCCESS == TaskState.SUCCESS``).
    One enum, because a msgpack union may hold only one string enum."""

    WAITING = "waiting"
    SKIPPED = "skipped"
    PENDING = "pending"
    QUEUED = "queued"
    SCHEDULED = "scheduled"
    ASSIGNED = "assigned"
    RUNNING = "running"
    SUCCESS = "success"
    FAILURE = "failure"
    RETRYING = "retrying"
    CANCELLED = "cancelled"


class WorkflowStep(Record):
    """One step: ``task`` (its ``id`` is left empty: the control plane names it) run at
    ``priority`` once every step in ``after`` has succeeded, fed as ``feed`` says."""

    task: TaskSpec
    after: list[int] = msgspec.field(default_factory=list)
    feed: Feed = Feed.NONE
    priority: Priority = Priority.NORMAL


class SubmitWorkflow(Message, tag="submit_workflow"):
    """Accept a whole workflow, or nothing of it. An empty ``workflow_id`` asks the control
    plane for one; a known one returns that workflow (nothing new is queued)."""

    steps: list[WorkflowStep]
    workflow_id: str = ""
    on_failure: OnFailure = OnFailure.CANCEL
    link: list[TaskSpec] = msgspec.field(default_factory=list)
    link_error: list[TaskSpec] = msgspec.field(default_factory=list)


class WorkflowAccepted(Message, tag="workflow_accepted"):
    workflow_id: str
    task_ids: list[str]  # step i's task id at index i


class GetWorkflow(Message, tag="get_workflow"):
    """A workflow's state; with ``wait``, held until it is final or ``wait`` seconds (in
    the range of every ``wait``, as ``Get``'s: PROTOCOL.md §3, "Ranges")."""

    workflow_id: str
    wait: Seconds | None = None


class StepInfo(Record):
    task_id: str
    name: str
    state: StepState
    after: list[int] = msgspec.field(default_factory=list)


class WorkflowInfo(Message, tag="workflow_info"):
    workflow_id: str
    state: WorkflowState
    steps: list[StepInfo]
    on_failure: OnFailure = OnFailure.CANCEL
    submitted_at: float | None = None
    finished_at: float | None = None


class CancelWorkflow(Message, tag="cancel_workflow"):
    workflow_id: str


class WorkflowCancelled(Message, tag="workflow_cancelled"):
    """``cancelled``: this request ended it (false when it was already final)."""

    workflow_id: str
    cancelled: bool
