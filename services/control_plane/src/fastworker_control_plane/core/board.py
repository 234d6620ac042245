"""The task board: every live task, the priority queues, the subworkers, the results.

The control plane's whole state; decides everything (accept, dispatch, redeliver, finish,
cancel) without I/O: the servers call it with ``now`` and act on what it returns. Every
operation that moves tasks returns its ``Effects`` (``core/effects``): the results that
became final, the transitions (when asked for with ``record``), the tasks a worker must
stop. The board coordinates its parts, each owning its state: the store of tasks and
results (``task_store``), how a task moves (``lifecycle``), what reports do
(``reports``), the queues, limits, dead letters, schedules and workers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from functools import partial

from fastworker_control_plane.core.board_types import BoardConfig as BoardConfig  # re-export
from fastworker_control_plane.core.board_types import task_size
from fastworker_control_plane.core.catalog import Catalog
from fastworker_control_plane.core.dead_letters import DeadLetters
from fastworker_control_plane.core.dispatching import Round, dispatch_round
from fastworker_control_plane.core.effects import Effects
from fastworker_control_plane.core.entropy import Entropy, counting
from fastworker_control_plane.core.intake import Intake
from fastworker_control_plane.core.lifecycle import Lifecycle
from fastworker_control_plane.core.limits import Limits, Scope, Setting
from fastworker_control_plane.core.listing import Listing
from fastworker_control_plane.core.named_queues import NamedQueues
from fastworker_control_plane.core.periodics import Periodics
from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.reports import Reports
from fastworker_control_plane.core.result_cache import ResultCache
from fastworker_control_plane.core.schedule import Schedule
from fastworker_control_plane.core.stats import TaskStats
from fastworker_control_plane.core.task_store import WAITING_FOR_TIME, TaskStore
from fastworker_control_plane.core.workers import Delivery, WorkerRegistry, WorkerSlot
from fastworker_protocol import (
    DEFAULT_QUEUE,
    Assignment,
    ErrorCode,
    Outcome,
    Priority,
    TaskEvent,
    TaskResult,
    TaskSignature,
    TaskSpec,
    TaskState,
    WorkerInfo,
    WorkerState,
)


class TaskBoard:
    def __init__(
        self, config: BoardConfig | None = None, *, entropy: Entropy | None = None
    ) -> None:
        self.config = config or BoardConfig()
        self.store = TaskStore(self.config)
        self.queues = NamedQueues()
        self.limits = Limits()
        self.controls_version = 0  # bumped when a pause or a limit changes (journaled)
        self.schedule = Schedule()
        self.catalog = Catalog()
        self.schedules = Periodics(self.schedule, self.store.__contains__)
        self.workers = WorkerRegistry()
        self._life = Lifecycle(
            self.config,
            self.store,
            self.queues,
            self.limits,
            self.schedule,
            self.catalog,
            entropy or counting(),
        )
        self._reports = Reports(self._life, self.workers)
        self.intake = Intake(self._life)  # what is admitted, and how
        self._batches = 0  # the last batch number sent

    def use_entropy(self, entropy: Entropy) -> None:
        """Take ids and jitter from ``entropy`` from now on (the engine gives the system's)."""
        self._life.entropy = entropy

    @property
    def entropy(self) -> Entropy:
        return self._life.entropy

    # Parts that readers see through ``BoardView`` (and tests look at directly).
    @property
    def results(self) -> ResultCache[TaskRecord]:
        return self.store.results

    @property
    def stats(self) -> TaskStats:
        return self._life.stats

    @property
    def dead_letters(self) -> DeadLetters:
        """Tasks failed for good, kept to be run again."""
        return self._life.dead_letters

    # --- submissions -------------------------------------------------------------------------

    def submit(
        self, specs: Sequence[TaskSpec], priority: Priority, now: float, *, record: bool = False
    ) -> tuple[list[str], Effects]:
        """Accept all of ``specs`` or none (raises ``Rejected`` naming the first bad one);
        a spec standing for a known task returns its id and queues nothing (``intake``)."""
        fx = Effects(record)
        return self.intake.submit(specs, priority, now, fx), fx

    def submit_each(
        self, specs: Sequence[TaskSpec], priority: Priority, now: float, *, record: bool = False
    ) -> tuple[list[str], list[Rejected], Effects]:
        """Accept every valid spec on its own; the id of a rejected one is ``""``."""
        fx = Effects(record)
        return *self.intake.submit_each(specs, priority, now, fx), fx

    def sweep(self, now: float) -> None:
        """Drop the results and dead letters past their time to live, and the
        idempotency keys whose task is gone (result expired or evicted)."""
        self.results.sweep(now)
        self.dead_letters.sweep(now)
        self.store.forget_stale_keys(now)

    def live_count(self, priority: Priority) -> int:
        """Tasks of ``priority`` not final (what ``max_queued`` bounds)."""
        return self.store.live_count(priority)

    def enqueue(
        self, spec: TaskSpec, size: int, priority: Priority, now: float, fx: Effects
    ) -> str:
        """Queue (or schedule) one admitted task, noting it in ``fx``; returns its id (a
        known task's, if ``spec`` stands for one)."""
        return self._life.accept(spec, size, priority, now, fx)

    def release_due(self, now: float, *, record: bool = False) -> Effects:
        """Queue the delayed or retrying tasks now due, run due periodic ticks
        (``queued`` counts the tasks queued)."""
        fx = Effects(record)
        tick = partial(self._enqueue_periodic, fx=fx)
        for key in self.schedule.pop_due(now, self._is_waiting_for_time):
            if self.schedules.owns(key):
                self.schedules.tick(key, now, tick)
                continue
            task = self.store.tasks[key]
            self._life.apply(task, TaskEvent.DUE, fx)
            task.queued_at = now
            self._life.queue(task, fx)
        return fx

    def _is_waiting_for_time(self, key: str) -> bool:
        if self.schedules.owns(key):
            return self.schedules.is_due_key(key)
        record = self.store.live(key)
        return record is not None and record.state in WAITING_FOR_TIME

    def _enqueue_periodic(self, spec: TaskSpec, priority: Priority, now: float, fx: Effects) -> str:
        return self.enqueue(spec, task_size(spec), priority, now, fx)

    def learn_schedules(self, signatures: Iterable[TaskSignature], now: float) -> None:
        """Start the periodic tasks these registrations declare (once per name)."""
        self.schedules.learn(signatures, self.catalog.checkers, now)

    def restore_controls(
        self, paused: Iterable[str], limits: dict[tuple[Scope, str], Setting]
    ) -> None:
        """Take back the pauses and the limits changed at run time, from the journal."""
        self.queues.paused.update(paused)
        self.limits.restore(limits)

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
        holding: Collection[str] | None = None,
        record: bool = False,
    ) -> Effects:
        """Add a subworker, serving ``queues`` (queue -> weight; by default every queue its
        tasks' registrations name). Re-registering an id first removes the old registration
        (its tasks are redelivered; some may become final doing so). ``holding`` is what
        it says it still holds: of the tasks it held when the last control plane was lost,
        those stay with it and the others are redelivered (``handover``; None: it does not
        say, and they wait for the end of the grace)."""
        if concurrency < 1:
            raise Rejected(ErrorCode.INVALID_MESSAGE, "concurrency must be at least 1")
        signatures = list(signatures)
        self.learn_tasks(signatures)
        self.learn_schedules(signatures, now)
        fx = Effects(record)
        self._remove_worker(worker_id, now, fx)
        names = frozenset(s.name for s in signatures)
        if queues is None:
            queues = dict.fromkeys(sorted({s.queue for s in signatures}) or [DEFAULT_QUEUE], 1)
        slot = WorkerSlot(
            worker_id, name, concurrency, names, now, local=local, confirms=confirms, queues=queues
        )
        self.workers.add(slot)
        if holding is not None:
            kept, lacking = self._life.handover.claim(worker_id, set(holding))
            for task_id in kept:
                if self._reports.held_by(task_id, worker_id) is not None:
                    slot.in_flight[task_id] = None
            self._redeliver_lost(worker_id, lacking, now, fx)
        return fx

    def end_handover(self, now: float, *, record: bool = False) -> Effects:
        """Past the grace of a takeover: redeliver the tasks in doubt that no subworker
        claimed (``handover``)."""
        fx = Effects(record)
        for worker_id, task_id in self._life.handover.expired(now):
            self._redeliver_lost(worker_id, [task_id], now, fx)
        return fx

    def _redeliver_lost(
        self, worker_id: str, task_ids: Iterable[str], now: float, fx: Effects
    ) -> None:
        for task_id in task_ids:
            held = self._reports.held_by(task_id, worker_id)
            if held is not None and task_id not in self._slot_tasks(worker_id):
                self._life.redeliver_lost(held, now, fx)

    def _slot_tasks(self, worker_id: str) -> Collection[str]:
        slot = self.workers.get(worker_id)
        return () if slot is None else slot.in_flight

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

    def remove_worker(self, worker_id: str, now: float, *, record: bool = False) -> Effects:
        """Forget a worker and redeliver what it held (some may become final doing so)."""
        fx = Effects(record)
        self._remove_worker(worker_id, now, fx)
        return fx

    def _remove_worker(self, worker_id: str, now: float, fx: Effects) -> None:
        slot = self.workers.pop(worker_id)
        if slot is not None:
            self._reports.worker_lost(slot, now, fx)

    def expire_silent(
        self, now: float, timeout: float, *, record: bool = False
    ) -> tuple[list[str], Effects]:
        """Remove workers silent for ``timeout`` seconds; returns their ids."""
        fx = Effects(record)
        removed = self.workers.silent_since(now - timeout)
        for worker_id in removed:
            self._remove_worker(worker_id, now, fx)
        return removed, fx

    def list_workers(self, now: float) -> list[WorkerInfo]:
        return [w.info(now) for w in self.workers]

    # --- dispatch -----------------------------------------------------------------------------

    def dispatch(
        self, ready: Collection[str], now: float = 0.0, *, record: bool = False
    ) -> tuple[dict[str, list[Assignment]], Effects]:
        """Hand queued tasks to the ``ready`` workers (those waiting for work), the
        least-loaded first, each from the queues it serves (``dispatching``); ``now`` is
        the clock rate limits go by.

        Only tasks a ready worker can take are looked at, so no backlog for busy workers,
        other queues or tasks at a limit delays a task an idle worker could start.
        """
        fx = Effects(record)
        slots = {s.worker_id: s for w in ready if (s := self.workers.get(w)) and s.accepts_work}
        plan_for = Round(
            self.queues,
            self.store.tasks,
            self._life.is_queued,
            self._reports.run_times.quick,
            self.limits,
            now,
        )
        plan = dispatch_round(plan_for, slots, self.config.max_batch_bytes, self._life.assign, fx)
        return plan, fx

    def deliver(self, worker_id: str, tasks: list[Assignment]) -> Delivery:
        """Tasks dispatched to a worker, as its fetch's reply, kept until it confirms them."""
        slot = self.workers.get(worker_id)
        if slot is None or not slot.confirms or not tasks:
            return Delivery(tasks)
        self._batches += 1
        return slot.deliver(tasks, self._batches)

    def heard(
        self, worker_id: str, received: Collection[int], now: float, *, record: bool = False
    ) -> Effects:
        """A request from the worker arrived, confirming ``received`` batches. Tasks of
        batches it never confirmed never reached it: they go back, uncounted, in front."""
        fx = Effects(record)
        slot = self.workers.get(worker_id)
        if slot is not None:
            self._reports.heard(slot, received, now, fx)
        return fx

    def is_queued(self, task_id: str) -> bool:
        return self._life.is_queued(task_id)

    # --- reports ------------------------------------------------------------------------------

    def report(
        self,
        worker_id: str,
        started: Iterable[str],
        outcomes: Iterable[Outcome],
        now: float,
        *,
        record: bool = False,
    ) -> Effects:
        """Apply a subworker's report (``core/reports``)."""
        fx = Effects(record)
        self._reports.report(self.touch(worker_id, now), started, outcomes, now, fx)
        return fx

    def time_out_overdue(self, now: float, margin: float, *, record: bool = False) -> Effects:
        """Fail running tasks silent ``margin`` past their time limit (``core/reports``)."""
        fx = Effects(record)
        self._reports.time_out_overdue(now, margin, fx)
        return fx

    # --- recovery, queries and cancel ---------------------------------------------------------

    def adopt(self, task: TaskRecord, now: float) -> Effects:
        """Take back a live task from the journal. One a subworker held when the control
        plane stopped is redelivered (and may so run out of redeliveries: then its final
        result is in ``finished``); a retrying one is queued at once."""
        fx = Effects()
        self._life.adopt(task, now, fx)
        return fx

    def keep(self, task: TaskRecord) -> None:
        """Take back a final result from the journal, for the rest of its time to live."""
        self._life.keep(task)

    def live_records(self) -> list[TaskRecord]:
        return self.store.live_records()

    def get(self, task_id: str, now: float) -> TaskResult | None:
        return self.store.get(task_id, now)

    def record(self, task_id: str, now: float, *, count: bool = True) -> TaskRecord | None:
        """A live task, or a finished one still in the result cache (not to be changed)."""
        return self.store.record(task_id, now, count=count)

    def cancel(
        self, task_id: str, now: float, *, record: bool = False
    ) -> tuple[TaskResult, Effects]:
        """Cancel a task that is not final (a running one's outcome is then discarded);
        returns the task's result now, and the effects: ``finished`` is empty when it was
        final already (nothing changed)."""
        fx = Effects(record)
        task = self.store.live(task_id)
        if task is None:
            final = self.results.get(task_id, now)
            if final is None:
                raise Rejected(ErrorCode.TASK_NOT_FOUND, f"task {task_id} is unknown or expired")
            return final.final or final.snapshot(), fx
        if task.state == TaskState.QUEUED:
            self.queues.discard(task)
        return self._life.finish(task, TaskEvent.CANCEL, now, fx), fx

    def list_tasks(self, status: TaskState | None, limit: int, now: float) -> list[TaskResult]:
        """Most recent first: live tasks, then cached results."""
        return self.store.list_tasks(status, limit, now)

    def task_listing(self, status: TaskState | None, limit: int, now: float) -> Listing:
        """``list_tasks`` cut to fit one reply message (``core/listing``)."""
        return self.store.task_listing(status, limit, now)

    def waiting_for_time(self) -> int:
        """Tasks waiting for an ETA or a retry backoff (counted, not tracked: O(live))."""
        return self.store.waiting_for_time()

    def __len__(self) -> int:
        """Live (not final) tasks."""
        return len(self.store)
