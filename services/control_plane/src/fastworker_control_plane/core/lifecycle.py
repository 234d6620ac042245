"""How a task moves: the transitions every board operation is made of, each one a state
change (``TaskRecord.apply``) plus what must go with it (the queue, the limits, the
statistics, the result cache, the dead letters, the change for the journal).

No decisions about *which* task moves are made here: the board and its policies choose,
this module carries a move out and notes it in the operation's ``Effects``.
"""

from __future__ import annotations

from fastworker_control_plane.core.board_types import BoardConfig, Change
from fastworker_control_plane.core.catalog import Catalog
from fastworker_control_plane.core.dead_letters import DeadLetters, from_record
from fastworker_control_plane.core.effects import Effects
from fastworker_control_plane.core.entropy import Entropy
from fastworker_control_plane.core.handover import Handover
from fastworker_control_plane.core.limits import Limits
from fastworker_control_plane.core.losses import lost_too_often
from fastworker_control_plane.core.named_queues import NamedQueues
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.core.schedule import Schedule
from fastworker_control_plane.core.stats import Tally, TaskLine, TaskStats
from fastworker_control_plane.core.task_store import TaskStore
from fastworker_control_plane.core.workers import WorkerSlot
from fastworker_protocol import (
    FailureReason,
    Priority,
    TaskError,
    TaskEvent,
    TaskResult,
    TaskSpec,
    TaskState,
)
from fastworker_protocol.attempts import RetryPolicy

# Times a task may go back to its queue because a lost subworker held it unstarted.
MAX_RETURNS = 25
HELD = (TaskState.ASSIGNED, TaskState.RUNNING)
_TALLIES = {
    TaskEvent.SUCCEED: Tally.SUCCEEDED,
    TaskEvent.FAIL: Tally.FAILED,
    TaskEvent.CANCEL: Tally.CANCELLED,
}


class Lifecycle:
    def __init__(
        self,
        config: BoardConfig,
        store: TaskStore,
        queues: NamedQueues,
        limits: Limits,
        schedule: Schedule,
        catalog: Catalog,
        entropy: Entropy,
    ) -> None:
        self.config = config
        self.store = store
        self._tasks = store.tasks  # read on every dispatch decision: no call in between
        self.queues = queues
        self.limits = limits
        self.schedule = schedule
        self.catalog = catalog
        self.entropy = entropy
        self.stats = TaskStats()
        self.dead_letters: DeadLetters = config.dead_letter_store()  # failed for good
        self.handover = Handover()  # tasks held when the last control plane was lost

    def apply(self, record: TaskRecord, event: TaskEvent, fx: Effects) -> None:
        state = record.apply(event)
        if state not in HELD:
            freed = self.limits.release(record.id)
            if freed is not None:  # a task parked on this key may go now
                self.queues.unpark(record.name, freed, self.is_queued)
        if fx.record:
            fx.changes.append(
                Change(state, record.id, record.name, record.worker_id, record.attempts, record)
            )

    def accept(self, spec: TaskSpec, size: int, priority: Priority, now: float, fx: Effects) -> str:
        """A new task, queued (or scheduled, for an ETA ahead); returns its id (a known
        task's, if ``spec`` stands for one: then nothing moves)."""
        existing = self.store.existing(spec, now)
        if existing is not None:
            return existing
        record = TaskRecord.from_spec(spec, priority, now, size)
        record.id = spec.id or self.entropy.new_id()
        self.store.remember_key(record, now)
        record.queue = spec.queue or self.catalog.queue(record.name)
        if record.time_limit is None:
            record.time_limit = self.catalog.time_limit(record.name)
        self.store.add(record)
        record.line = self.stats.line(record.name, record.priority)
        record.line.submitted += 1
        if spec.eta is not None and spec.eta > now:
            self.apply(record, TaskEvent.SCHEDULE, fx)
            self.schedule.push(spec.eta, record.id)
        else:
            self.apply(record, TaskEvent.ENQUEUE, fx)
            self.queue(record, fx)
        return record.id

    def adopt(self, record: TaskRecord, now: float, fx: Effects) -> None:
        """A live task back from the journal: one a subworker held when the control plane
        stopped stays with it, in doubt, until it says whether it still holds it (see
        ``handover``), a retrying one is queued at once, the others go back where they
        were."""
        record.line = self.stats.line(record.name, record.priority)
        self.store.add(record)
        self.store.remember_key(record)
        record.queued_at = now
        if record.state in HELD and record.worker_id is not None:
            self.handover.hold(record.worker_id, record.id, now)
        elif record.state in HELD:
            self.redeliver_lost(record, now, fx)
        elif record.state == TaskState.SCHEDULED:
            self.schedule.push(record.eta or now, record.id)
        elif record.state == TaskState.RETRYING:
            self.apply(record, TaskEvent.DUE, fx)
            self.queue(record, fx)
        else:  # where it was in its queue
            self.queues.restore(record)

    def keep(self, record: TaskRecord) -> None:
        """A final result back from the journal, for the rest of its time to live."""
        assert record.finished_at is not None, "final records have finished"
        record.line = self.stats.line(record.name, record.priority)
        record.final = record.snapshot()
        self.store.remember_key(record)
        self.keep_final(record, record.finished_at)

    def assign(self, record: TaskRecord, slot: WorkerSlot, fx: Effects) -> None:
        record.attempts += 1
        record.worker_id = slot.worker_id
        self.apply(record, TaskEvent.ASSIGN, fx)
        slot.in_flight[record.id] = None
        slot.assigned_total += 1

    def is_queued(self, task_id: str) -> bool:
        record = self._tasks.get(task_id)
        return record is not None and record.state == TaskState.QUEUED

    def queue(self, record: TaskRecord, fx: Effects, *, front: bool = False) -> None:
        record.seq = self.queues.push(record, front=front)
        fx.queued += 1

    def started(self, record: TaskRecord, at: float) -> None:
        record.started_at = at
        self.stats.started(line(record), at - record.queued_at)

    def retry(
        self,
        record: TaskRecord,
        error: TaskError,
        policy: RetryPolicy,
        now: float,
        fx: Effects,
        asked: float | None = None,
    ) -> None:
        """FAILURE -> RETRYING in one step; queued again when the backoff (or the delay
        the task ``asked`` for) is over."""
        line(record).retried += 1
        record.attempt_errors.append(error)
        self.apply(record, TaskEvent.FAIL, fx)
        self.apply(record, TaskEvent.RETRY, fx)
        record.retries += 1
        record.worker_id = None
        record.started_at = None
        record.eta = now + policy.delay(record.retries, self.entropy.uniform, asked)
        self.schedule.push(record.eta, record.id)  # its eta: when the retry is due

    def redeliver(
        self, record: TaskRecord, now: float, reason: str, fx: Effects, *, in_place: bool = False
    ) -> None:
        """Queue a task its subworker held again, at the front. Only a started one (or one
        whose process crashed) counts against ``max_redeliveries``; ``MAX_RETURNS`` bounds
        the others (a task may kill its subworker before its start is reported)."""
        if record.state == TaskState.RUNNING or reason == FailureReason.WORKER_CRASHED:
            record.lost += 1
        else:
            record.returned += 1
        record.error = lost_too_often(record, reason, self.config.max_redeliveries, MAX_RETURNS)
        if record.error is not None:
            self.finish(record, TaskEvent.FAIL, now, fx)
            return
        self.requeue(record, now, fx, in_place=in_place)

    def redeliver_lost(self, record: TaskRecord, now: float, fx: Effects) -> None:
        """A task held when the last control plane stopped, that no subworker holds now:
        queued again where it was."""
        self.redeliver(record, now, "control_plane_restart", fx, in_place=True)

    def requeue(
        self, record: TaskRecord, now: float, fx: Effects, *, in_place: bool = False
    ) -> None:
        """Queue a held task again: at the front, or (``in_place``, after a restart) where
        it was before it was handed out."""
        self.apply(record, TaskEvent.REQUEUE, fx)
        record.worker_id = None
        record.started_at = None
        record.queued_at = now
        if in_place:
            self.queues.restore(record)
            fx.queued += 1
        else:
            self.queue(record, fx, front=True)

    def finish(self, record: TaskRecord, event: TaskEvent, now: float, fx: Effects) -> TaskResult:
        """The task is final: out of the live tasks, into the result cache (and, failed,
        the dead letters); its result goes to ``fx.finished``."""
        self.apply(record, event, fx)
        record.finished_at = now
        self.store.remove(record)
        self.stats.finished(line(record), _TALLIES[event], now)
        record.final = record.snapshot()
        if event == TaskEvent.FAIL:  # before ``keep_final`` lets go of its arguments
            self.dead_letters.add(from_record(record, now), now)
        self.keep_final(record, now)
        fx.finished.append(record.final)
        return record.final

    def keep_final(self, record: TaskRecord, finished_at: float) -> None:
        if record.result_ttl is None:  # its task's own (kept on it: see ``TaskRecord``)
            record.result_ttl = self.catalog.result_ttl(record.name)
        self.store.keep_final(record, finished_at)


def line(record: TaskRecord) -> TaskLine:
    assert record.line is not None, "set when the task was accepted"
    return record.line
