"""The task board: every live task, the priority queues, the subworkers, the results.

The control plane's whole state; decides everything (accept, dispatch, redeliver, finish,
cancel) without I/O: the servers call it with ``now`` and act on what it returns. Final
results leave the board's task table for the result cache.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Collection, Iterable, Sequence
from functools import partial
from itertools import islice

from fastworker_control_plane.core.admission import queue_full, refusal
from fastworker_control_plane.core.board_types import MESSAGE_OVERHEAD, Change, task_size
from fastworker_control_plane.core.board_types import BoardConfig as BoardConfig  # re-export
from fastworker_control_plane.core.catalog import Catalog
from fastworker_control_plane.core.dead_letters import from_record
from fastworker_control_plane.core.dispatch_policy import RunTimes
from fastworker_control_plane.core.dispatching import Round, dispatch_round
from fastworker_control_plane.core.idempotency import IdempotencyKeys
from fastworker_control_plane.core.limits import Limits
from fastworker_control_plane.core.listing import Listing, fit, listed
from fastworker_control_plane.core.named_queues import NamedQueues
from fastworker_control_plane.core.periodics import Periodics
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.result_cache import ResultCache
from fastworker_control_plane.core.retry_policy import (
    RetryPolicy,
    Uniform,
    crashed,
    lost_reason,
    lost_too_often,
    summarized,
)
from fastworker_control_plane.core.schedule import Schedule
from fastworker_control_plane.core.stats import Tally, TaskLine, TaskStats
from fastworker_control_plane.core.workers import (
    Delivery,
    WorkerRegistry,
    WorkerSlot,
    overdue,
    silent_past_limit,
)
from fastworker_protocol import (
    DEFAULT_QUEUE,
    Assignment,
    ErrorCode,
    FailureReason,
    Outcome,
    Priority,
    TaskError,
    TaskEvent,
    TaskResult,
    TaskSignature,
    TaskSpec,
    TaskState,
    WorkerInfo,
    WorkerState,
)

# Times a task may go back to its queue because a lost subworker held it unstarted.
MAX_RETURNS = 25
_HELD = (TaskState.ASSIGNED, TaskState.RUNNING)
_WAITING_FOR_TIME = (TaskState.SCHEDULED, TaskState.RETRYING)
_RECLAIMABLE = (TaskState.QUEUED, *_HELD)
_TALLIES = {
    TaskEvent.SUCCEED: Tally.SUCCEEDED,
    TaskEvent.FAIL: Tally.FAILED,
    TaskEvent.CANCEL: Tally.CANCELLED,
}


class TaskBoard:
    def __init__(
        self, config: BoardConfig | None = None, uniform: Uniform = random.uniform
    ) -> None:
        self.config = config or BoardConfig()
        self.queues = NamedQueues()
        self.limits = Limits()
        self.controls_version = 0  # bumped when a pause or a limit changes (journaled)
        self.schedule = Schedule()
        self._uniform = uniform
        self.catalog = Catalog()
        self._tasks: dict[str, TaskRecord] = {}
        self.schedules = Periodics(self.schedule, self._enqueue_periodic, self._tasks.__contains__)
        self.periodics = self.schedules.active
        self.saved_periodics = self.schedules.saved  # from the journal, until declared again
        # Transitions since the engine last took them, kept only while someone listens.
        self.record_changes = False
        self.changes: list[Change] = []
        self.workers = WorkerRegistry()
        # Finished tasks for reads and the dashboard (see ``_cache``).
        self.results: ResultCache[TaskRecord] = ResultCache(
            self.config.result_max_size, self.config.result_ttl, self.config.result_max_bytes
        )
        self.dead_letters = self.config.dead_letter_store()  # failed for good, to run again
        self.stats = TaskStats()
        self.keys = IdempotencyKeys()
        self.live: dict[Priority, int] = dict.fromkeys(Priority, 0)  # not final, per priority
        self._run_times = RunTimes()  # which names may wait in prefetch buffers
        self._batches = 0  # the last batch number sent
        self.superseded: list[tuple[str, str]] = []  # see ``take_superseded``

    # --- submissions -------------------------------------------------------------------------

    def submit(self, specs: Sequence[TaskSpec], priority: Priority, now: float) -> list[str]:
        """Accept all of ``specs`` or none (raises ``Rejected`` naming the first bad one).

        A spec whose id is already known (live or in the result cache) is not queued again:
        its id is returned as if accepted, which is what makes client retries safe."""
        sizes = [task_size(spec) for spec in specs]
        for index, (spec, size) in enumerate(zip(specs, sizes, strict=True)):
            if (rejected := self._refusal(index, spec, size)) is not None:
                raise rejected
        new = sum(1 for spec in specs if self._existing(spec, now) is None)
        if (full := self._full(priority, new)) is not None:
            raise full
        return [self.enqueue(s, size, priority, now) for s, size in zip(specs, sizes, strict=True)]

    def submit_each(
        self, specs: Sequence[TaskSpec], priority: Priority, now: float
    ) -> tuple[list[str], list[Rejected]]:
        """Accept every valid spec on its own; the id of a rejected one is ``""``."""
        ids, rejections = [], []
        for index, spec in enumerate(specs):
            size = task_size(spec)
            rejected = self._refusal(index, spec, size)
            if rejected is None and self._existing(spec, now) is None:
                rejected = self._full(priority, 1, index=index)
            if rejected is None:
                ids.append(self.enqueue(spec, size, priority, now))
            else:
                ids.append("")
                rejections.append(rejected)
        return ids, rejections

    def _known(self, task_id: str, now: float) -> bool:
        """A live task or a kept result: submitting it again queues nothing."""
        return bool(task_id) and (
            task_id in self._tasks or self.results.peek(task_id, now) is not None
        )

    def _existing(self, spec: TaskSpec, now: float) -> str | None:
        """The id of the known task ``spec`` stands for (by id, then by key), if any."""
        if self._known(spec.id, now):
            return spec.id
        task_id = self.keys.get(spec)
        return task_id if task_id is not None and self._known(task_id, now) else None

    def forget_stale_keys(self, now: float) -> int:
        """Drop idempotency keys whose task is gone (result expired or evicted)."""
        return self.keys.forget(lambda task_id: not self._known(task_id, now))

    def _full(self, priority: Priority, new: int, index: int | None = None) -> Rejected | None:
        return queue_full(priority, self.live[priority], new, self.config.max_queued, index)

    def _refusal(self, index: int, spec: TaskSpec, size: int) -> Rejected | None:
        return refusal(
            index,
            spec,
            size,
            self.catalog.checkers.get(spec.name),
            max_bytes=self.config.max_batch_bytes,
            max_message_size=self.config.max_message_size,
        )

    def enqueue(self, spec: TaskSpec, size: int, priority: Priority, now: float) -> str:
        existing = self._existing(spec, now)
        if existing is not None:
            return existing
        task_id = spec.id or uuid.uuid4().hex
        self.keys.remember(spec.name, spec.idempotency_key, task_id, partial(self._known, now=now))
        record = TaskRecord.from_spec(spec, priority, now, size)
        record.id = task_id
        record.queue = spec.queue or self.catalog.queue(record.name)
        if record.timeout is None:
            record.timeout = self.catalog.timeout(record.name)
        self._tasks[task_id] = record
        self.live[priority] += 1
        record.line = self.stats.line(record.name, record.priority)
        record.line.submitted += 1
        if spec.eta is not None and spec.eta > now:
            self._apply(record, TaskEvent.SCHEDULE)
            self.schedule.push(spec.eta, task_id)
        else:
            self._apply(record, TaskEvent.ENQUEUE)
            self._queue(record)
        return task_id

    def _queue(self, record: TaskRecord, *, front: bool = False) -> None:
        record.seq = self.queues.push(record, front=front)

    def _apply(self, record: TaskRecord, event: TaskEvent) -> None:
        state = record.apply(event)
        if state not in _HELD:
            freed = self.limits.release(record.id)
            if freed is not None:  # a task parked on this key may go now
                self.queues.unpark(record.name, freed, self.is_queued)
        if self.record_changes:
            self.changes.append(
                Change(state, record.id, record.name, record.worker_id, record.attempts, record)
            )

    def take_changes(self) -> list[Change]:
        changes, self.changes = self.changes, []
        return changes

    def release_due(self, now: float) -> int:
        """Queue the delayed or retrying tasks now due, run due periodic ticks; how many queued."""
        queued = 0
        for key in self.schedule.pop_due(now, self._is_waiting_for_time):
            if self.schedules.owns(key):
                queued += self.schedules.tick(key, now)
                continue
            record = self._tasks[key]
            self._apply(record, TaskEvent.DUE)
            record.queued_at = now
            self._queue(record)
            queued += 1
        return queued

    def _is_waiting_for_time(self, key: str) -> bool:
        if self.schedules.owns(key):
            return self.schedules.is_due_key(key)
        record = self._tasks.get(key)
        return record is not None and record.state in _WAITING_FOR_TIME

    def _enqueue_periodic(self, spec: TaskSpec, priority: Priority, now: float) -> str:
        return self.enqueue(spec, task_size(spec), priority, now)

    def learn_schedules(self, signatures: Iterable[TaskSignature], now: float) -> None:
        """Start the periodic tasks these registrations declare (once per name)."""
        self.schedules.learn(signatures, self.catalog.checkers, now)

    def learn_tasks(self, signatures: Iterable[TaskSignature]) -> None:
        """Accept submissions of these tasks even before a subworker that runs them joins."""
        self.catalog.learn(signatures, self.limits)

    def known_task_names(self) -> list[str]:
        return self.catalog.names()

    # --- subworkers ----------------------------------------------------------------------------

    def register(
        self,
        worker_id: str,
        name: str,
        concurrency: int,
        signatures: Iterable[TaskSignature],
        now: float,
        *,
        local: bool = False,
        confirms: bool = False,
        queues: dict[str, int] | None = None,
    ) -> list[TaskResult]:
        """Add a subworker, serving ``queues`` (queue -> weight; by default every queue its
        tasks' registrations name). Re-registering an id first removes the old registration
        (its tasks are redelivered); returns tasks that became final doing so."""
        if concurrency < 1:
            raise Rejected(ErrorCode.INVALID_MESSAGE, "concurrency must be at least 1")
        signatures = list(signatures)
        self.learn_tasks(signatures)
        self.learn_schedules(signatures, now)
        finished = self.remove_worker(worker_id, now)
        names = frozenset(s.name for s in signatures)
        if queues is None:
            queues = dict.fromkeys(sorted({s.queue for s in signatures}) or [DEFAULT_QUEUE], 1)
        slot = WorkerSlot(
            worker_id, name, concurrency, names, now, local=local, confirms=confirms, queues=queues
        )
        self.workers.add(slot)
        return finished

    def touch(self, worker_id: str, now: float) -> WorkerSlot:
        """Record that the worker is alive; raises ``Rejected`` if it is not registered."""
        slot = self.workers.get(worker_id)
        if slot is None:
            raise Rejected(
                ErrorCode.UNKNOWN_WORKER, f"worker {worker_id!r} is not registered: register again"
            )
        slot.last_seen = now
        return slot

    def drain(self, worker_id: str, now: float) -> None:
        self.touch(worker_id, now).state = WorkerState.DRAINING

    def remove_worker(self, worker_id: str, now: float) -> list[TaskResult]:
        """Forget a worker and redeliver what it held; returns the tasks that became final."""
        slot = self.workers.pop(worker_id)
        if slot is None:
            return []
        finished = []
        # Newest first, each pushed to the front: the queue keeps their original order.
        for task_id in reversed(slot.in_flight):
            record = self._tasks.get(task_id)
            if record is not None and record.worker_id == worker_id and record.state in _HELD:
                result = self._redeliver(record, now, reason=FailureReason.WORKER_LOST)
                if result is not None:
                    finished.append(result)
        return finished

    def expire_silent(self, now: float, timeout: float) -> tuple[list[str], list[TaskResult]]:
        """Remove workers silent for ``timeout`` seconds."""
        removed = self.workers.silent_since(now - timeout)
        finished = [r for wid in removed for r in self.remove_worker(wid, now)]
        return removed, finished

    def list_workers(self, now: float) -> list[WorkerInfo]:
        return [w.info(now) for w in self.workers]

    # --- dispatch -----------------------------------------------------------------------------

    def dispatch(self, ready: Collection[str], now: float = 0.0) -> dict[str, list[Assignment]]:
        """Hand queued tasks to the ``ready`` workers (those waiting for work), the
        least-loaded first, each from the queues it serves (``dispatching``); ``now`` is
        the clock rate limits go by.

        Only tasks a ready worker can take are looked at, so no backlog for busy workers,
        other queues or tasks at a limit delays a task an idle worker could start.
        """
        slots = {s.worker_id: s for w in ready if (s := self.workers.get(w)) and s.accepts_work}
        plan_for = Round(
            self.queues, self._tasks, self.is_queued, self._run_times.quick, self.limits, now
        )
        return dispatch_round(plan_for, slots, self.config.max_batch_bytes, self._assign)

    def _assign(self, record: TaskRecord, slot: WorkerSlot) -> None:
        record.attempts += 1
        record.worker_id = slot.worker_id
        self._apply(record, TaskEvent.ASSIGN)
        slot.in_flight[record.id] = None
        slot.assigned_total += 1

    def deliver(self, worker_id: str, tasks: list[Assignment]) -> Delivery:
        """Tasks dispatched to a worker, as its fetch's reply, kept until it confirms them."""
        slot = self.workers.get(worker_id)
        if slot is None or not slot.confirms or not tasks:
            return Delivery(tasks)
        self._batches += 1
        return slot.deliver(tasks, self._batches)

    def heard(self, worker_id: str, received: Collection[int], now: float) -> None:
        """A request from the worker arrived, confirming ``received`` batches. Tasks of
        batches it never confirmed never reached it: they go back, uncounted, in front."""
        slot = self.workers.get(worker_id)
        if slot is None:
            return
        for task_id in reversed(slot.heard(received)):
            record = self._held_by(task_id, worker_id)
            slot.in_flight.pop(task_id, None)
            if record is not None and record.state == TaskState.ASSIGNED:
                record.attempts -= 1  # the attempt never began
                self._requeue(record, now)

    def is_queued(self, task_id: str) -> bool:
        record = self._tasks.get(task_id)
        return record is not None and record.state == TaskState.QUEUED

    # --- reports ------------------------------------------------------------------------------

    def report(
        self, worker_id: str, started: Iterable[str], outcomes: Iterable[Outcome], now: float
    ) -> list[TaskResult]:
        """Apply a subworker's report; returns the tasks that became final."""
        slot = self.touch(worker_id, now)
        for task_id in started:
            record = self._held_by(task_id, worker_id)
            if record is not None and record.state == TaskState.ASSIGNED:
                self._started(record, now)
                self._apply(record, TaskEvent.START)
        finished = []
        for outcome in outcomes:
            if slot.in_flight.pop(outcome.task_id, False) is None:
                slot.completed += 1
            record = self._held_by(outcome.task_id, worker_id)
            if record is None and not outcome.requeue:
                record = self._reclaim(outcome.task_id, worker_id)
            if record is None:
                continue  # cancelled, or final already
            result = self._apply_outcome(record, outcome, now)
            if result is not None:
                finished.append(result)
        return finished

    def _apply_outcome(self, record: TaskRecord, outcome: Outcome, now: float) -> TaskResult | None:
        if record.started_at is None:
            self._started(record, outcome.started_at or now)
        if record.state == TaskState.ASSIGNED and not outcome.requeue:
            self._apply(record, TaskEvent.START)  # it ran: its start and end came in one report
        if outcome.started_at is not None and outcome.finished_at is not None:
            ran = outcome.finished_at - outcome.started_at  # the subworker's own clock
        else:
            ran = now - (record.started_at or now)
        self.stats.ran(_line(record), ran)
        self._run_times.observe(record.name, ran)
        if outcome.requeue or crashed(outcome):  # interrupted, or its process died under it
            return self._redeliver(record, now, reason=lost_reason(outcome))
        if outcome.ok:
            record.result = outcome.result
            return self._finish(record, TaskEvent.SUCCEED, now)
        error = outcome.error or TaskError(type="Error", message="unknown failure")
        policy = self.catalog.policy(record.name)
        if policy.retries(error, record.retries, record.max_retries, outcome.retryable):
            self._retry(record, error, policy, now)
            return None
        if record.attempt_errors:
            record.attempt_errors.append(error)
            error = summarized(error, record.attempt_errors)
        record.error = error
        return self._finish(record, TaskEvent.FAIL, now)

    def _started(self, record: TaskRecord, at: float) -> None:
        record.started_at = at
        self.stats.started(_line(record), at - record.queued_at)

    def _retry(self, record: TaskRecord, error: TaskError, policy: RetryPolicy, now: float) -> None:
        """FAILURE -> RETRYING in one step; queued again when the backoff is over."""
        _line(record).retried += 1
        record.attempt_errors.append(error)
        self._apply(record, TaskEvent.FAIL)
        self._apply(record, TaskEvent.RETRY)
        record.retries += 1
        record.worker_id = None
        record.started_at = None
        self.schedule.push(now + policy.delay(record.retries, self._uniform), record.id)

    def _reclaim(self, task_id: str, worker_id: str) -> TaskRecord | None:
        """A live task this worker finished though it no longer holds it (taken back when
        the worker was expelled or the control plane restarted). The first outcome wins:
        the task does not run again, and a worker holding it now is told to stop."""
        record = self._tasks.get(task_id)
        if record is None or record.state not in _RECLAIMABLE:
            return None
        if record.state == TaskState.QUEUED:
            self.queues.discard(record)
            record.worker_id = worker_id
            self._apply(record, TaskEvent.ASSIGN)
        elif record.worker_id != worker_id:
            if record.worker_id is not None:
                self.superseded.append((record.worker_id, task_id))
            record.worker_id = worker_id
        return record

    def time_out_overdue(self, now: float, margin: float) -> list[TaskResult]:
        """Fail running tasks silent ``margin`` past their time limit (``overdue``) with
        reason ``timeout``; their workers are told to stop them (``superseded``)."""
        finished = []
        for record in overdue(self.workers, self._tasks, now, margin):
            self.superseded.append((record.worker_id or "", record.id))
            record.error = silent_past_limit(margin)
            finished.append(self._finish(record, TaskEvent.FAIL, now))
        return finished

    def take_superseded(self) -> list[tuple[str, str]]:
        """(worker id, task id) of tasks a worker holds that another one finished."""
        superseded, self.superseded = self.superseded, []
        return superseded

    def _held_by(self, task_id: str, worker_id: str) -> TaskRecord | None:
        record = self._tasks.get(task_id)
        if record is None or record.worker_id != worker_id or record.state not in _HELD:
            return None
        return record

    def _redeliver(
        self, record: TaskRecord, now: float, reason: str, *, in_place: bool = False
    ) -> TaskResult | None:
        """Queue a task its subworker held again, at the front. Only a started one (or one
        whose process crashed) counts against ``max_redeliveries``; ``MAX_RETURNS`` bounds
        the others (a task may kill its subworker before its start is reported)."""
        if record.state == TaskState.RUNNING or reason == FailureReason.WORKER_CRASHED:
            record.lost += 1
        else:
            record.returned += 1
        record.error = lost_too_often(record, reason, self.config.max_redeliveries, MAX_RETURNS)
        if record.error is not None:
            return self._finish(record, TaskEvent.FAIL, now)
        self._requeue(record, now, in_place=in_place)
        return None

    def _requeue(self, record: TaskRecord, now: float, *, in_place: bool = False) -> None:
        """Queue a held task again: at the front, or (``in_place``, after a restart) where
        it was before it was handed out."""
        self._apply(record, TaskEvent.REQUEUE)
        record.worker_id = None
        record.started_at = None
        record.queued_at = now
        if in_place:
            self.queues.restore(record)
        else:
            self._queue(record, front=True)

    def _finish(self, record: TaskRecord, event: TaskEvent, now: float) -> TaskResult:
        self._apply(record, event)
        record.finished_at = now
        del self._tasks[record.id]
        self.live[record.priority] -= 1
        self.stats.finished(_line(record), _TALLIES[event], now)
        record.final = record.snapshot()
        if event == TaskEvent.FAIL:  # before ``_cache`` lets go of its arguments
            self.dead_letters.add(from_record(record, now), now)
        self._cache(record, now)
        return record.final

    def _cache(self, record: TaskRecord, finished_at: float) -> None:
        """Keep a final task for reads, at its encoded size, without its arguments unless
        configured (it never runs again; kept whole, 40 x 16 MB arguments took 900 MB)."""
        if not self.config.result_keep_arguments:
            record.drop_arguments()
        if record.result_ttl is None:  # its task's own (kept on it: see ``TaskRecord``)
            record.result_ttl = self.catalog.result_ttl(record.name)
        self.results.put(record.id, record, finished_at, record.encoded_size(), record.result_ttl)

    # --- recovery, queries and cancel ---------------------------------------------------------

    def adopt(self, record: TaskRecord, now: float) -> TaskResult | None:
        """Take back a live task from the journal. One a subworker held when the control
        plane stopped is redelivered (and may so run out of redeliveries: then its final
        result is returned); a retrying one is queued at once."""
        record.line = self.stats.line(record.name, record.priority)
        self._tasks[record.id] = record
        self.live[record.priority] += 1
        self.keys.remember(record.name, record.idempotency_key, record.id)
        record.queued_at = now
        if record.state in _HELD:
            return self._redeliver(record, now, reason="control_plane_restart", in_place=True)
        if record.state == TaskState.SCHEDULED:
            self.schedule.push(record.eta or now, record.id)
            return None
        if record.state == TaskState.RETRYING:
            self._apply(record, TaskEvent.DUE)
            self._queue(record)
        else:  # where it was in its queue
            self.queues.restore(record)
        return None

    def keep(self, record: TaskRecord) -> None:
        """Take back a final result from the journal, for the rest of its time to live."""
        assert record.finished_at is not None, "final records have finished"
        record.line = self.stats.line(record.name, record.priority)
        record.final = record.snapshot()
        self.keys.remember(record.name, record.idempotency_key, record.id)
        self._cache(record, record.finished_at)

    def live_records(self) -> list[TaskRecord]:
        return list(self._tasks.values())

    def get(self, task_id: str, now: float) -> TaskResult | None:
        record = self._tasks.get(task_id)
        if record is not None:
            return record.snapshot()
        record = self.results.get(task_id, now)
        return None if record is None else record.final or record.snapshot()

    def record(self, task_id: str, now: float, *, count: bool = True) -> TaskRecord | None:
        """A live task, or a finished one still in the result cache (not to be changed);
        ``count=False`` reads the cache without touching its statistics or LRU order."""
        record = self._tasks.get(task_id)
        if record is not None:
            return record
        return self.results.get(task_id, now) if count else self.results.peek(task_id, now)

    def cancel(self, task_id: str, now: float) -> tuple[TaskResult, bool]:
        """Cancel a task that is not final (a running one's outcome is then discarded);
        returns the task's result now and whether this call changed it."""
        record = self._tasks.get(task_id)
        if record is None:
            final = self.results.get(task_id, now)
            if final is None:
                raise Rejected(ErrorCode.TASK_NOT_FOUND, f"task {task_id} is unknown or expired")
            return final.final or final.snapshot(), False
        if record.state == TaskState.QUEUED:
            self.queues.discard(record)
        return self._finish(record, TaskEvent.CANCEL, now), True

    def list_tasks(self, status: TaskState | None, limit: int, now: float) -> list[TaskResult]:
        """Most recent first: live tasks, then cached results."""
        return list(islice(listed(self._tasks, self.results, status, now), max(0, limit)))

    def task_listing(self, status: TaskState | None, limit: int, now: float) -> Listing:
        """``list_tasks`` cut to fit one reply message (``core/listing``)."""
        budget = self.config.max_message_size - MESSAGE_OVERHEAD
        return fit(listed(self._tasks, self.results, status, now), limit, budget)

    def waiting_for_time(self) -> int:
        """Tasks waiting for an ETA or a retry backoff (counted, not tracked: O(live))."""
        return sum(1 for r in self._tasks.values() if r.state in _WAITING_FOR_TIME)

    def __len__(self) -> int:
        """Live (not final) tasks."""
        return len(self._tasks)


def _line(record: TaskRecord) -> TaskLine:
    assert record.line is not None, "set when the task was accepted"
    return record.line
