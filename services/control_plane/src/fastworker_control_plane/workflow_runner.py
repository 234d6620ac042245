"""Workflows on the engine (issue 21): the glue between the pure ``WorkflowBook`` and the
task board. It does what the book decides (``core/workflows`` says what that is): queues
released steps, cancels steps, wakes the requests held on a workflow, counts outcomes.

It never decides anything itself, and it never blocks: every final task result reaches
it through ``Engine.finished``, and the results its own actions produce (a cancel, a
step the board refused) go round the same loop, iteratively, however deep the graph.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from fastworker_control_plane.core.board_types import task_size
from fastworker_control_plane.core.effects import Effects
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.workflow_check import named
from fastworker_control_plane.core.workflow_graph import Release
from fastworker_control_plane.core.workflows import Actions, WorkflowBook, check
from fastworker_protocol import (
    ErrorCode,
    FailureReason,
    Priority,
    TaskError,
    TaskResult,
    TaskState,
)
from fastworker_protocol.workflows import (
    SubmitWorkflow,
    WorkflowAccepted,
    WorkflowCancelled,
    WorkflowInfo,
)

if TYPE_CHECKING:
    from fastworker_control_plane.engine import Engine


class WorkflowRunner:
    def __init__(self, engine: Engine, book: WorkflowBook) -> None:
        self._engine = engine
        self.book = book
        self.outcomes: Counter[str] = Counter()  # final workflows by state, since start
        self._results: deque[TaskResult] = deque()
        self._draining = False
        self._waiting: dict[str, dict[asyncio.Future[None], None]] = {}

    # --- requests ------------------------------------------------------------------------

    def submit(self, message: SubmitWorkflow) -> WorkflowAccepted:
        """Check the whole workflow against the registered tasks, accept it and queue its
        roots; raises ``Rejected`` (nothing queued) if any part of it cannot run."""
        engine = self._engine
        engine.outbox.check_writable()
        message = named(message, engine.board.catalog)  # short names made full
        check(message, engine.board.catalog, engine.board.config)
        if not message.workflow_id:
            message = msgspec.structs.replace(message, workflow_id=engine.entropy.new_id())
        accepted = self.book.accept(message, engine.clock())
        self.carry_out(Actions(release=accepted.release, records=accepted.records))
        return WorkflowAccepted(workflow_id=accepted.workflow_id, task_ids=accepted.task_ids)

    def info(self, workflow_id: str) -> WorkflowInfo:
        view, now = self._engine.view, self._engine.clock()

        def lookup(task_id: str) -> TaskState | None:
            record = view.task(task_id, now)
            return None if record is None else record.state

        info = self.book.info(workflow_id, lookup)
        if info is None:
            raise Rejected(
                ErrorCode.TASK_NOT_FOUND,
                f"workflow {workflow_id} is unknown or expired",
                workflow_id=workflow_id,
            )
        return info

    async def wait(self, workflow_id: str, timeout: float) -> WorkflowInfo:
        """The workflow's state once it is final, or after ``timeout`` seconds."""
        info = self.info(workflow_id)
        if info.state != "running" or timeout <= 0 or not self._engine.accepting:
            return info
        budget = self._engine.waiters.budget
        if not budget.take():  # answered now, as a wait at --max-wait is
            return info
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(workflow_id, {})[ended] = None
        clock = self._engine.clock  # its wake-up ends the wait as the workflow's end does
        timer = clock.call_at(clock() + timeout, lambda: _settle(ended))
        try:
            await ended
        finally:
            timer.cancel()
            budget.give_back()
            waiting = self._waiting.get(workflow_id, {})
            waiting.pop(ended, None)
            if not waiting:
                self._waiting.pop(workflow_id, None)
        info = self.info(workflow_id)
        if info.state == "running" and not self._engine.accepting:
            raise Rejected(
                ErrorCode.SHUTTING_DOWN,
                "the control plane is shutting down before the workflow ended",
            )
        return info

    def cancel(self, workflow_id: str) -> WorkflowCancelled:
        self._engine.outbox.check_writable()
        actions = self.book.cancel(workflow_id, self._engine.clock())
        self.carry_out(actions)
        return WorkflowCancelled(workflow_id=workflow_id, cancelled=bool(actions.ended))

    # --- results -------------------------------------------------------------------------

    def finished(self, results: Iterable[TaskResult]) -> None:
        """Final task results, from every path that makes one (``Engine.finished``)."""
        self._results.extend(r for r in results if r.status.is_final)
        if self._draining:  # the loop below is running further up the stack
            return
        self._draining = True
        try:
            while self._results:
                self.carry_out(self.book.finished(self._results.popleft(), self._engine.clock()))
        finally:
            self._draining = False

    def carry_out(self, actions: Actions) -> None:
        """Journal the decision, queue what is released, cancel what is to be cancelled,
        wake waiters."""
        engine = self._engine
        engine.outbox.keep_records(actions.records)
        for release in actions.release:
            self._release(release)
        for task_id in actions.cancel:
            try:
                engine.cancel(task_id, checked=False)
            except Rejected:  # unknown to the board (a result that expired): nothing runs
                continue
        if actions.release or actions.cancel:
            engine.kick()
            engine.arm_timer()
        for workflow_id in actions.ended:
            flow = self.book.info(workflow_id)
            if flow is not None:
                self.outcomes[flow.state] += 1
        if actions.ended:
            self._wake(actions.ended)

    def _release(self, release: Release) -> None:
        """Queue a released step (or link task) under its id. It was admitted with its
        workflow: no ``queue_full``, and no subworker need have registered it again (after
        a restart none has yet); a fed result that makes it too large fails the step."""
        spec, priority = release
        board, now = self._engine.board, self._engine.clock()
        size = task_size(spec)
        rejected = board.intake.refusal(0, spec, size)
        if rejected is not None and rejected.code != ErrorCode.UNKNOWN_TASK:
            self._results.append(_refused(spec.id, spec.name, priority, rejected, now))
            self.finished(())
            return
        effects = Effects(self._engine.outbox.recording)
        board.enqueue(spec, size, priority, now, effects)
        self._engine.take(effects)
        known = board.get(spec.id, now)
        if known is not None and known.status.is_final:  # final already: as if just ended
            self.finished([known])

    def _wake(self, workflow_ids: list[str]) -> None:
        self._engine.outbox.when_durable(lambda: self._release_waiters(workflow_ids))

    def _release_waiters(self, workflow_ids: Iterable[str]) -> None:
        for workflow_id in workflow_ids:
            for ended in self._waiting.pop(workflow_id, {}):
                _settle(ended)

    def release_all(self) -> None:
        """Answer every held request now (the control plane stops)."""
        self._release_waiters(list(self._waiting))

    def sweep(self) -> int:
        return self.book.sweep(self._engine.clock())


def _settle(ended: asyncio.Future[None]) -> None:
    if not ended.done():
        ended.set_result(None)


def _refused(
    task_id: str, name: str, priority: Priority, rejected: Rejected, now: float
) -> TaskResult:
    error = TaskError(
        type="Rejected",
        message=f"{rejected.code}: {rejected.message}",
        reason=FailureReason.EXCEPTION,
    )
    return TaskResult(
        task_id=task_id,
        name=name,
        status=TaskState.FAILURE,
        priority=priority,
        error=error,
        finished_at=now,
    )
