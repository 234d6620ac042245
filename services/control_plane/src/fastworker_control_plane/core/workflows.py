"""The workflow book: every workflow the control plane holds (issue 21). Pure: no I/O, no
clock (``now`` is passed in), no board; it decides and the caller acts.

How the caller drives it:

- ``check(submit, catalog, config)`` first, then ``accept(submit, now)``: the roots to
  queue come back in ``Accepted.release``. The caller queues every ``(spec, priority)``
  it is given on the board under the spec's own (deterministic) id. Released tasks were
  admitted with their workflow: they should not meet the board's ``queue_full`` bound,
  and one the board refuses anyway (a fed result made it too large, say) is reported
  back as a final ``failure`` result of that task through ``finished``.
- ``finished(result, now)`` for **every** final task result (success, failure not
  retried, cancelled), including those of cancels this book asked for and of link
  tasks; results of tasks that are not a workflow's are ignored at the cost of a string
  split. What comes back is done the same way: ``release`` queued, ``cancel`` cancelled
  on the board (each of those cancels yields a final result, passed back here).
- ``cancel(workflow_id, now)`` for a request to cancel a workflow; ``info(workflow_id,
  lookup)`` to read one. ``Actions.ended`` names workflows that became final (to wake
  waiters, count outcomes).

Durability (for the journal): every decision returns its records
(``core/workflow_records``) in ``Accepted.records`` or ``Actions.records``. The caller
journals them **in the same commit** as the board transitions of the same call (the
result that caused them, the tasks they queued or cancelled). ``snapshot()`` is the book's whole
state as records, for a compacted journal. ``restore(records, now)`` on a new book
replays a snapshot and the records journaled after it (any prefix of the history) and
returns ``outstanding`` actions: every step released and not known to be final is given
again (its id makes queueing it again idempotent; this is how a chord callback whose
parents all finished but which was never queued gets queued), link tasks not known to be
final likewise, and released steps of workflows that ended are cancelled again. For each
task given again that the board already holds final, the caller passes that result to
``finished``, as if it had just ended. After that, the book behaves exactly as the one
that wrote the records would have.

Memory: a workflow holds its definition (a step's arguments let go once it has ended),
one state byte per step, and the results a consumer still needs (see
``core/workflow_graph``). Workflows that are not final are never dropped; ``accept``
refuses new ones (``queue_full``) while they hold more than ``max_live_bytes``. Final
ones are kept for ``info`` and idempotent resubmission, and evicted oldest first past
``max_finished``, past ``ttl`` seconds after they ended, or past ``max_bytes`` in all;
an evicted workflow id accepted again runs again (as a task id whose result expired).

``link``/``link_error`` on a single task (not a workflow) is not here: ``TaskSpec`` has
no such fields yet.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from fastworker_control_plane.core.entropy import NewId, counting
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.workflow_check import check as check  # re-export
from fastworker_control_plane.core.workflow_check import check_shape
from fastworker_control_plane.core.workflow_graph import Flow, Lookup, Release, Steps
from fastworker_control_plane.core.workflow_records import (
    LinkOutcome,
    StepOutcome,
    WorkflowCancel,
    WorkflowDefined,
    WorkflowProgress,
    WorkflowRecord,
    parse_link,
    parse_step,
)
from fastworker_protocol import ErrorCode, TaskResult
from fastworker_protocol.workflows import SubmitWorkflow, WorkflowInfo

DEFAULT_MAX_FINISHED = 10_000
DEFAULT_TTL = 3600.0
DEFAULT_MAX_BYTES = 16 * 1024 * 1024  # final workflows
DEFAULT_MAX_LIVE_BYTES = 32 * 1024 * 1024  # workflows not final: refuse new ones past it


@dataclass
class Accepted:
    """``task_ids``: step ``i``'s at index ``i``; ``release``: the roots to queue now
    (empty when the workflow was known already); ``records``: for the journal."""

    workflow_id: str
    task_ids: list[str]
    release: list[Release] = field(default_factory=list)
    records: list[WorkflowRecord] = field(default_factory=list)


@dataclass
class Actions:
    """Tasks to queue (each at its priority) and to cancel, the workflows that became
    final, and the records of the decision for the journal."""

    release: list[Release] = field(default_factory=list)
    cancel: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    records: list[WorkflowRecord] = field(default_factory=list)

    def add(self, steps: Steps) -> None:
        self.release += steps.release
        self.cancel += steps.cancel


class WorkflowBook:
    def __init__(
        self,
        *,
        max_finished: int = DEFAULT_MAX_FINISHED,
        ttl: float = DEFAULT_TTL,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_live_bytes: int = DEFAULT_MAX_LIVE_BYTES,
        new_id: NewId | None = None,
    ) -> None:
        """``new_id`` names a workflow submitted without an id (the engine gives one
        before it gets here; by default the book counts)."""
        if max_finished <= 0 or ttl <= 0 or max_bytes <= 0 or max_live_bytes <= 0:
            raise ValueError("max_finished, ttl, max_bytes and max_live_bytes must be positive")
        self.max_finished = max_finished
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.max_live_bytes = max_live_bytes
        self._new_id = new_id or counting().new_id
        self._flows: dict[str, Flow] = {}
        self._finished: OrderedDict[str, Flow] = OrderedDict()  # oldest end first
        self.live_bytes = 0  # estimated bytes held by workflows not final
        self.finished_bytes = 0  # ... and by final ones
        self.evicted = 0

    # --- requests ------------------------------------------------------------------------

    def accept(self, submit: SubmitWorkflow, now: float) -> Accepted:
        """Take a workflow that passed ``check`` (its shape is checked again here: raises
        ``Rejected``). Idempotent by workflow id: a known one returns its ids and queues
        nothing, whatever this submission's steps."""
        check_shape(submit)
        self.sweep(now)  # an id evicted by now is not known
        workflow_id = submit.workflow_id or self._new_id()
        known = self._flows.get(workflow_id)
        if known is not None:
            return Accepted(workflow_id, known.task_ids())
        defined = WorkflowDefined(
            workflow_id=workflow_id,
            submitted_at=now,
            steps=submit.steps,
            on_failure=submit.on_failure,
            link=submit.link,
            link_error=submit.link_error,
        )
        flow = Flow(defined)
        if self.live_bytes and self.live_bytes + flow.bytes > self.max_live_bytes:
            raise Rejected(
                ErrorCode.QUEUE_FULL,
                f"running workflows hold about {self.live_bytes} bytes (bound "
                f"{self.max_live_bytes}); this one needs {flow.bytes}: retry later",
                live_bytes=self.live_bytes,
                bound=self.max_live_bytes,
            )
        self._flows[workflow_id] = flow
        self.live_bytes += flow.bytes
        return Accepted(workflow_id, flow.task_ids(), flow.start(), [defined])

    def finished(self, result: TaskResult, now: float) -> Actions:
        """A task's final result: what follows from it if it is a workflow's step or link."""
        actions = Actions()
        if not result.status.is_final:
            return actions
        step = parse_step(result.task_id)
        flow = self._flows.get(step[0]) if step else None
        if step is not None and flow is not None and step[1] < len(flow.steps):
            index = step[1]
            was_running, before = flow.running, flow.bytes
            steps = flow.step_ended(index, result.status, result.result, now)
            if steps is not None:
                kept = flow.results.get(index)
                actions.records.append(
                    StepOutcome(
                        workflow_id=flow.id,
                        step=index,
                        state=result.status,
                        at=now,
                        result=None if kept is None else kept.value,
                    )
                )
                actions.add(steps)
                self._account(flow, before, was_running, actions)
                self.sweep(now)
            return actions
        workflow_id = parse_link(result.task_id)
        flow = self._flows.get(workflow_id) if workflow_id is not None else None
        if flow is not None:
            before = flow.bytes
            if flow.link_ended(result.task_id):
                actions.records.append(LinkOutcome(workflow_id=flow.id, task_id=result.task_id))
                self._account(flow, before, was_running=False, actions=actions)
        return actions

    def cancel(self, workflow_id: str, now: float) -> Actions:
        """End a running workflow ``cancelled``: its released steps are to be cancelled,
        the others skipped. ``ended`` is empty if it had ended already (nothing changes);
        an unknown (or evicted) id raises ``Rejected(task_not_found)``."""
        flow = self._flows.get(workflow_id)
        if flow is None:
            raise Rejected(
                ErrorCode.TASK_NOT_FOUND,
                f"workflow {workflow_id} is unknown or expired",
                workflow_id=workflow_id,
            )
        actions = Actions()
        before = flow.bytes
        steps = flow.cancel(now)
        if steps is not None:
            actions.records.append(WorkflowCancel(workflow_id=workflow_id, at=now))
            actions.add(steps)
            self._account(flow, before, was_running=True, actions=actions)
            self.sweep(now)
        return actions

    def info(self, workflow_id: str, lookup: Lookup | None = None) -> WorkflowInfo | None:
        """A workflow's state and every step's, ``None`` if unknown (or evicted).

        A step is ``waiting`` or ``skipped``, or its task's state: final ones the book
        knows; for released ones it asks ``lookup(task_id)`` (the board's current state:
        queued, scheduled, assigned, running, retrying), ``queued`` if it says nothing."""
        flow = self._flows.get(workflow_id)
        return None if flow is None else flow.info(lookup)

    def workflow_of(self, task_id: str) -> str | None:
        """The id of the held workflow ``task_id`` is a step or link task of."""
        step = parse_step(task_id)
        if step is not None and step[0] in self._flows:
            return step[0]
        workflow_id = parse_link(task_id)
        return workflow_id if workflow_id in self._flows else None

    def __contains__(self, workflow_id: object) -> bool:
        return workflow_id in self._flows

    def __len__(self) -> int:
        return len(self._flows)

    @property
    def running(self) -> int:
        return len(self._flows) - len(self._finished)

    # --- memory --------------------------------------------------------------------------

    def sweep(self, now: float) -> int:
        """Evict final workflows past the bounds, oldest end first; returns how many.
        The newest final one stays even when it alone is past ``max_bytes``."""
        evicted = 0
        while self._finished:
            workflow_id, oldest = next(iter(self._finished.items()))
            expired = (oldest.finished_at or 0.0) + self.ttl <= now
            crowded = len(self._finished) > self.max_finished
            heavy = self.finished_bytes > self.max_bytes and len(self._finished) > 1
            if not (expired or crowded or heavy):
                break
            del self._finished[workflow_id]
            del self._flows[workflow_id]
            self.finished_bytes -= oldest.bytes
            evicted += 1
        self.evicted += evicted
        return evicted

    def _account(self, flow: Flow, before: int, was_running: bool, actions: Actions) -> None:
        """Move ``flow``'s bytes to where they belong now (and the flow, if it ended)."""
        if was_running:
            self.live_bytes -= before
        else:
            self.finished_bytes -= before
        if flow.running:
            self.live_bytes += flow.bytes
            return
        self.finished_bytes += flow.bytes
        if was_running:
            self._finished[flow.id] = flow
            actions.ended.append(flow.id)

    # --- durability ----------------------------------------------------------------------

    def snapshot(self) -> list[WorkflowRecord]:
        """The whole book as records: for each workflow (final ones first, oldest end
        first), its definition then its progress."""
        records: list[WorkflowRecord] = []
        for flow in (*self._finished.values(), *self._running()):
            records += (flow.defined(), flow.progress())
        return records

    def restore(self, records: Iterable[WorkflowRecord], now: float) -> Actions:
        """Rebuild an empty book from ``records`` (a snapshot and what was journaled after
        it, in order) and return what may not have been done (see the module docstring);
        replayed decisions make no records. Bounds apply at ``now`` once it is done."""
        if self._flows:
            raise ValueError("restore needs an empty book")
        for record in records:
            self._replay(record)
        ended = sorted(
            (f for f in self._flows.values() if not f.running),
            key=lambda f: f.finished_at or 0.0,
        )
        self._finished = OrderedDict((f.id, f) for f in ended)
        self.finished_bytes = sum(f.bytes for f in ended)
        self.live_bytes = sum(f.bytes for f in self._running())
        self.sweep(now)
        actions = Actions()
        for flow in self._flows.values():
            actions.add(flow.outstanding())
        return actions

    def _replay(self, record: WorkflowRecord) -> None:
        flow = self._flows.get(record.workflow_id)
        match record:
            case WorkflowDefined():
                if flow is None or flow.submitted_at != record.submitted_at:
                    flow = self._flows[record.workflow_id] = Flow(record)
                    flow.start()
            case WorkflowProgress() if flow is not None:
                flow.load(record)
            case StepOutcome() if flow is not None and record.step < len(flow.steps):
                flow.step_ended(record.step, record.state, record.result, record.at)
            case LinkOutcome() if flow is not None:
                flow.link_ended(record.task_id)
            case WorkflowCancel() if flow is not None:
                flow.cancel(record.at)

    def _running(self) -> list[Flow]:
        return [flow for flow in self._flows.values() if flow.running]
