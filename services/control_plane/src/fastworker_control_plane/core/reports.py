"""What a subworker's report does to the tasks it names: started, succeeded, failed (to
retry or for good), interrupted or crashed (to run again); and what its silence does:
the tasks of a worker lost or of batches it never confirmed go back, those silent past
their time limit fail. The decisions are the retry policy's and the redelivery
bounds'; ``Lifecycle`` carries them out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from fastworker_control_plane.core.dispatch_policy import RunTimes
from fastworker_control_plane.core.effects import Effects
from fastworker_control_plane.core.lifecycle import HELD, Lifecycle, line
from fastworker_control_plane.core.losses import crashed, lost_reason
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.core.workers import (
    WorkerRegistry,
    WorkerSlot,
    overdue,
    silent_past_limit,
)
from fastworker_protocol import FailureReason, Outcome, TaskError, TaskEvent, TaskState
from fastworker_protocol.attempts import summarized

_RECLAIMABLE = (TaskState.QUEUED, *HELD)


class Reports:
    def __init__(self, lifecycle: Lifecycle, workers: WorkerRegistry) -> None:
        self._life = lifecycle
        self._store = lifecycle.store
        self._tasks = lifecycle.store.tasks
        self._workers = workers
        self.run_times = RunTimes()  # which names may wait in prefetch buffers

    def report(
        self,
        slot: WorkerSlot,
        started: Iterable[str],
        outcomes: Iterable[Outcome],
        now: float,
        fx: Effects,
    ) -> None:
        worker_id = slot.worker_id
        for task_id in started:
            record = self.held_by(task_id, worker_id)
            if record is not None and record.state == TaskState.ASSIGNED:
                self._life.started(record, now)
                self._life.apply(record, TaskEvent.START, fx)
        for outcome in outcomes:
            if slot.in_flight.pop(outcome.task_id, False) is None:
                slot.completed += 1
            record = self.held_by(outcome.task_id, worker_id)
            if record is None and not outcome.requeue:
                record = self._reclaim(outcome.task_id, worker_id, fx)
            if record is not None:  # else cancelled, or final already
                self._outcome(record, outcome, now, fx)

    def _outcome(self, record: TaskRecord, outcome: Outcome, now: float, fx: Effects) -> None:
        life = self._life
        if record.started_at is None:
            life.started(record, outcome.started_at or now)
        if record.state == TaskState.ASSIGNED and not outcome.requeue:
            life.apply(record, TaskEvent.START, fx)  # its start and end came in one report
        if outcome.started_at is not None and outcome.finished_at is not None:
            ran = outcome.finished_at - outcome.started_at  # the subworker's own clock
        else:
            ran = now - (record.started_at or now)
        life.stats.ran(line(record), ran)
        self.run_times.observe(record.name, ran)
        if outcome.requeue or crashed(outcome):  # interrupted, or its process died under it
            life.redeliver(record, now, lost_reason(outcome), fx)
            return
        if outcome.ok:
            record.result = outcome.result
            life.finish(record, TaskEvent.SUCCEED, now, fx)
            return
        error = outcome.error or TaskError(type="Error", message="unknown failure")
        policy = life.catalog.policy(record.name)
        if policy.retries(error, record.retries, record.max_retries, outcome.retryable):
            life.retry(record, error, policy, now, fx, outcome.retry_in)
            return
        if record.attempt_errors:
            record.attempt_errors.append(error)
            error = summarized(error, record.attempt_errors)
        record.error = error
        life.finish(record, TaskEvent.FAIL, now, fx)

    def _reclaim(self, task_id: str, worker_id: str, fx: Effects) -> TaskRecord | None:
        """A live task this worker finished though it no longer holds it (taken back when
        the worker was expelled or the control plane restarted). The first outcome wins:
        the task does not run again, and a worker holding it now is told to stop."""
        record = self._store.live(task_id)
        if record is None or record.state not in _RECLAIMABLE:
            return None
        if record.state == TaskState.QUEUED:
            self._life.queues.discard(record)
            record.worker_id = worker_id
            self._life.apply(record, TaskEvent.ASSIGN, fx)
        elif record.worker_id != worker_id:
            if record.worker_id is not None:
                fx.supersede(record.worker_id, task_id)
            record.worker_id = worker_id
        return record

    def time_out_overdue(self, now: float, margin: float, fx: Effects) -> None:
        """Fail running tasks silent ``margin`` past their time limit (``overdue``) with
        reason ``timeout``; their workers are told to stop them (``fx.superseded``)."""
        for record in overdue(self._workers, self._store.tasks, now, margin):
            fx.supersede(record.worker_id or "", record.id)
            record.error = silent_past_limit(margin)
            self._life.finish(record, TaskEvent.FAIL, now, fx)

    def worker_lost(self, slot: WorkerSlot, now: float, fx: Effects) -> None:
        """The worker is gone: what it held goes back to the queues. Newest first, each
        pushed to the front: the queue keeps their original order."""
        for task_id in reversed(slot.in_flight):
            record = self.held_by(task_id, slot.worker_id)
            if record is not None:
                self._life.redeliver(record, now, FailureReason.WORKER_LOST, fx)

    def heard(self, slot: WorkerSlot, received: Collection[int], now: float, fx: Effects) -> None:
        """The worker confirmed ``received`` batches. Tasks of batches it never confirmed
        never reached it: they go back, uncounted, in front."""
        for task_id in reversed(slot.heard(received)):
            record = self.held_by(task_id, slot.worker_id)
            slot.in_flight.pop(task_id, None)
            if record is not None and record.state == TaskState.ASSIGNED:
                record.attempts -= 1  # the attempt never began
                self._life.requeue(record, now, fx)

    def held_by(self, task_id: str, worker_id: str) -> TaskRecord | None:
        record = self._tasks.get(task_id)
        if record is None or record.worker_id != worker_id or record.state not in HELD:
            return None
        return record
