"""A workflow's task ids, and the records the journal keeps of workflows. Pure.

Ids are deterministic, so that resubmitting anything a workflow queues is idempotent:
step ``i`` is ``"<workflow_id>.<i>"`` (the protocol's rule), link ``k`` is
``"<workflow_id>.link-<k>"`` and link_error ``k`` is ``"<workflow_id>.link_error-<k>"``.
A step id ends in ``.`` and decimal digits and a link id never does, so no workflow's link
can be taken for another workflow's step (``"a.link.0"`` would be step 0 of ``"a.link"``).

The records are the journal's file format for workflows (tags ``workflow_*``, beside the
task entries' ``put``/``done``...), with the same rules as ``durability/schema.py``: maps
with field names, so fields may be added, never renamed or retyped. Two kinds:

- events, in the ``records`` of the book's decisions: ``WorkflowDefined`` (accepted),
  ``StepOutcome`` (a released step's final result), ``LinkOutcome`` (a link task's),
  ``WorkflowCancel`` (cancelled by request). Replayed in order through the same logic
  that made them, they rebuild the book exactly.
- an image, in ``WorkflowBook.snapshot()``: ``WorkflowDefined`` (its steps' arguments let
  go once they are final) followed by ``WorkflowProgress``, the workflow's whole state.

Every record is idempotent: applying one twice leaves the state it left once.
"""

from __future__ import annotations

from typing import Any

import msgspec

from fastworker_protocol import TaskSpec, TaskState
from fastworker_protocol.workflows import OnFailure, WorkflowState, WorkflowStep

LINK = "link"
LINK_ERROR = "link_error"


def step_id(workflow_id: str, index: int) -> str:
    return f"{workflow_id}.{index}"


def link_id(workflow_id: str, kind: str, index: int) -> str:
    return f"{workflow_id}.{kind}-{index}"


def parse_step(task_id: str) -> tuple[str, int] | None:
    """``(workflow_id, index)`` if ``task_id`` has the shape of a step id."""
    workflow_id, dot, tail = task_id.rpartition(".")
    if not dot or not tail.isascii() or not tail.isdigit() or (tail[0] == "0" and tail != "0"):
        return None
    return workflow_id, int(tail)


def parse_link(task_id: str) -> str | None:
    """The workflow id if ``task_id`` has the shape of a link or link_error id."""
    workflow_id, dot, tail = task_id.rpartition(".")
    kind, dash, number = tail.rpartition("-")
    if dot and dash and kind in (LINK, LINK_ERROR) and number.isascii() and number.isdigit():
        return workflow_id
    return None


class WorkflowDefined(msgspec.Struct, tag="workflow", kw_only=True, omit_defaults=True, gc=False):
    """A workflow accepted: its whole definition. Applied to a book that already holds
    the same ``workflow_id`` with the same ``submitted_at``, it changes nothing; with
    another ``submitted_at`` (the id was evicted, then accepted again) it replaces it."""

    workflow_id: str
    submitted_at: float
    steps: list[WorkflowStep]
    on_failure: OnFailure = OnFailure.CANCEL
    link: list[TaskSpec] = msgspec.field(default_factory=list)
    link_error: list[TaskSpec] = msgspec.field(default_factory=list)


class StepOutcome(msgspec.Struct, tag="workflow_step", kw_only=True, omit_defaults=True):
    """Step ``step`` ended ``state`` (success, failure or cancelled) at ``at``.

    ``result`` is the step's result when the book kept it (a child or a link still needs
    it), else left out: what is journaled is what memory holds."""

    workflow_id: str
    step: int
    state: TaskState
    at: float
    result: Any = None


class LinkOutcome(msgspec.Struct, tag="workflow_link", kw_only=True, omit_defaults=True):
    """A link or link_error task (``task_id``) is final: it is not queued again."""

    workflow_id: str
    task_id: str


class WorkflowCancel(msgspec.Struct, tag="workflow_cancel", kw_only=True, omit_defaults=True):
    workflow_id: str
    at: float


class WorkflowProgress(msgspec.Struct, tag="workflow_progress", kw_only=True, omit_defaults=True):
    """A workflow's whole state, after its ``WorkflowDefined`` in a snapshot.

    ``steps`` has one character per step: ``w`` waiting, ``r`` released (queued, not
    final), ``s`` success, ``f`` failure, ``c`` cancelled, ``k`` skipped. ``results``
    holds the results still needed, by step index; ``links_open`` the link tasks queued
    and not yet final."""

    workflow_id: str
    steps: str
    state: WorkflowState = WorkflowState.RUNNING
    finished_at: float | None = None
    results: dict[int, Any] = msgspec.field(default_factory=dict)
    links_open: list[str] = msgspec.field(default_factory=list)


WorkflowRecord = WorkflowDefined | StepOutcome | LinkOutcome | WorkflowCancel | WorkflowProgress
