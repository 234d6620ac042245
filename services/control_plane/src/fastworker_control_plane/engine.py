"""The control plane's engine: the task board plus the asyncio glue around it.

It acts on what the board decides (the ``Effects`` each operation returns: results to
tell, workers to stop, transitions to publish and journal), holds the requests that wait
(clients for results, subworkers for work: ``held_fetches``), drives every timer from
one injected clock (``world``), and runs dispatch once per event-loop turn however many
submissions and reports arrived in it, so work moves in batches under load.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence

import structlog

from fastworker_control_plane import world
from fastworker_control_plane.action_log import ActionLog
from fastworker_control_plane.core import queue_controls
from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.board_view import BoardView
from fastworker_control_plane.core.effects import Effects
from fastworker_control_plane.core.entropy import Entropy
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.workers import Delivery
from fastworker_control_plane.core.workflows import WorkflowBook
from fastworker_control_plane.durability.journal import Journal
from fastworker_control_plane.events import (
    DEFAULT_BACKLOG,
    DEFAULT_MAX_SUBSCRIPTIONS,
    EventBus,
    Subscription,
)
from fastworker_control_plane.held_fetches import HeldFetches
from fastworker_control_plane.operations import Operations
from fastworker_control_plane.outbox import Outbox, Replication
from fastworker_control_plane.tracing import DispatchTracer
from fastworker_control_plane.waiters import (
    DEFAULT_MAX_HELD_WAITS,
    CompletionWaiters,
    WaitBudget,
)
from fastworker_control_plane.workflow_runner import WorkflowRunner
from fastworker_control_plane.world import Alarm, clock_of, system_entropy
from fastworker_protocol import (
    Assign,
    ErrorCode,
    Outcome,
    Priority,
    TaskResult,
    TaskSignature,
    TaskSpec,
)

log = structlog.get_logger(__name__)

# What the engine takes as its clock: a ``world.Clock``, or a function giving the time.
Clock = world.Clock | Callable[[], float]


class Engine:
    def __init__(
        self,
        board: TaskBoard,
        *,
        heartbeat_timeout: float,
        clock: Clock = time.time,
        entropy: Entropy | None = None,
        workflows: WorkflowBook | None = None,
        max_held_waits: int = DEFAULT_MAX_HELD_WAITS,
        max_event_streams: int = DEFAULT_MAX_SUBSCRIPTIONS,
    ) -> None:
        """``clock``: a ``world.Clock``, or a function giving the time (wake-ups then come
        from the running event loop); ``entropy`` (the system's by default) is given to
        the board and the workflows for new ids and retry jitter."""
        self.board = board
        self.heartbeat_timeout = heartbeat_timeout
        self.clock = clock_of(clock)
        self.entropy = entropy or system_entropy()
        board.use_entropy(self.entropy)
        self.waiters = CompletionWaiters(WaitBudget(max_held_waits), self.clock)
        self.events = EventBus(max_event_streams)
        self._fetches = HeldFetches(self.clock)
        self._dispatch_scheduled = False
        self._alarm = Alarm(self.clock, self._release_due)
        self.accepting = True
        self.dispatch_tracer: DispatchTracer | None = None  # set when exporting traces
        self.view = BoardView(board)  # what readers (views, metrics, listings) see
        self.outbox = Outbox(self.view, self.events, self.clock)  # the stream and the journal
        self.actions = ActionLog()
        self.operations = Operations(self)  # what operators do (``operations``)
        if workflows is None:  # final workflows outlive their steps' results
            workflows = WorkflowBook(ttl=max(3600.0, board.config.result_ttl))
        self.workflows = WorkflowRunner(self, workflows)

    # --- clients -------------------------------------------------------------------------

    def submit(self, specs: Sequence[TaskSpec], priority: Priority) -> list[str]:
        self.outbox.check_writable()
        ids, effects = self.board.submit(specs, priority, self.clock(), record=self._recording)
        self._moved(effects)
        return ids

    def submit_each(
        self, specs: Sequence[TaskSpec], priority: Priority
    ) -> tuple[list[str], list[Rejected]]:
        self.outbox.check_writable()
        ids, rejected, effects = self.board.submit_each(
            specs, priority, self.clock(), record=self._recording
        )
        self._moved(effects)
        return ids, rejected

    @property
    def _recording(self) -> bool:
        return self.outbox.recording

    def _moved(self, effects: Effects) -> None:
        """Tasks moved: act on the effects, then dispatch and wake up for what is due."""
        self.take(effects)
        self.kick()
        self.arm_timer()

    def take(self, effects: Effects) -> None:
        """Act on what a board operation did: keep its transitions (and dead letters gone)
        to publish, tell the results, have workers stop what others finished."""
        self.outbox.keep(effects)
        if effects.finished:
            self.finished(effects.finished)
        for holder, task_id in effects.superseded:
            self._tell_to_stop(holder, task_id)

    @property
    def journal(self) -> Journal | None:
        return self.outbox.journal

    def keep_journal(self, journal: Journal) -> None:
        """Write every transition to ``journal`` from now on (it has been replayed and
        started)."""
        self.outbox.journal = journal

    @property
    def replication(self) -> Replication | None:
        return self.outbox.replication

    @replication.setter
    def replication(self, replication: Replication | None) -> None:
        """Set on a replicated leader: acknowledgements wait for the replicas too."""
        self.outbox.replication = replication

    def lookup(self, task_id: str) -> TaskResult | None:
        return self.board.get(task_id, self.clock())

    async def wait(
        self, task_ids: list[str], timeout: float, *, any_final: bool = False
    ) -> list[TaskResult | None]:
        """Results once every task (with ``any_final``: one) is final or ``timeout``
        passes; ``Rejected`` with ``shutting_down`` if the control plane stops first."""
        results = await self.waiters.wait(task_ids, timeout, self.lookup, any_final=any_final)
        pending = [r is not None and not r.status.is_final for r in results]
        if not self.accepting and (all(pending) if any_final else any(pending)):
            raise Rejected(
                ErrorCode.SHUTTING_DOWN,
                "the control plane is shutting down before the tasks finished",
            )
        return results

    def cancel(self, task_id: str, *, checked: bool = True) -> tuple[TaskResult, bool]:
        """Cancel a task; one that a subworker holds is cancelled there too, through the
        reply to its held fetch (answered at once) or its next one. ``checked=False``: a
        workflow's own cancel (its workflow was accepted when writes were)."""
        if checked:
            self.outbox.check_writable()
        result, effects = self.board.cancel(task_id, self.clock(), record=self._recording)
        changed = bool(effects.finished)
        if changed:
            self.take(effects)
            self.kick()  # publishes the transition
            if result.worker_id is not None:
                self._tell_to_stop(result.worker_id, task_id)
        return result, changed

    def _tell_to_stop(self, worker_id: str, task_id: str) -> None:
        """Have a worker stop a task it holds, through the reply to its held fetch
        (answered at once) or its next one."""
        if self.board.workers.get(worker_id) is not None:
            self._fetches.tell_to_stop(worker_id, task_id)

    # --- subworkers ------------------------------------------------------------------------

    def register(
        self,
        worker_id: str,
        name: str,
        concurrency: int,
        signatures: Sequence[TaskSignature],
        pipe_id: int,
        *,
        local: bool,
        confirms: bool = False,
        queues: dict[str, int] | None = None,
        holding: Sequence[str] | None = None,
    ) -> None:
        defined = self.board.schedules.defined
        named = [s.name for s in signatures if s.name in defined]  # declared now, maybe
        self.take(
            self.board.register(
                worker_id,
                name,
                concurrency,
                signatures,
                self.clock(),
                local=local,
                confirms=confirms,
                queues=queues,
                holding=holding,
                record=self._recording,
            )
        )
        if taken := [n for n in named if n not in defined]:
            log.warning(
                "run-time schedules dropped: their tasks now declare schedules of these names",
                schedules=taken,
                worker_id=worker_id,
            )
        self.seen(worker_id, pipe_id)
        self.kick()
        self.arm_timer()

    def seen(self, worker_id: str, pipe_id: int) -> None:
        """Remember which connection a worker speaks over, to notice when it drops."""
        self._fetches.seen(worker_id, pipe_id)

    def heard(self, worker_id: str, pipe_id: int, received: Sequence[int]) -> None:
        """A request from the worker: note its connection and the batches it confirms
        (the tasks of batches it never received are queued again)."""
        self.seen(worker_id, pipe_id)
        effects = self.board.heard(worker_id, received, self.clock(), record=self._recording)
        self.take(effects)
        if effects.queued:
            self.kick()

    async def assign(self, worker_id: str, wait: float, prefetch: int = 0) -> Assign:
        """The reply to a ``fetch``: tasks, and the ids of held tasks since cancelled."""
        delivery = await self.fetch(worker_id, wait, prefetch)
        return Assign(
            tasks=delivery.tasks,
            batch=delivery.batch,
            cancel=self._fetches.take_cancels(worker_id),
        )

    async def fetch(self, worker_id: str, wait: float, prefetch: int = 0) -> Delivery:
        """Hold until dispatch hands this worker tasks, one of its tasks is cancelled, or
        ``wait`` seconds pass; a draining worker is answered at once (it only reports)."""
        slot = self.board.touch(worker_id, self.clock())
        slot.set_prefetch(prefetch)
        if not slot.accepts_work or self._fetches.has_cancels(worker_id):
            return Delivery()
        held = self._fetches.hold(worker_id, wait)
        self.kick()
        return await held

    @property
    def fetching(self) -> frozenset[str]:
        """The workers whose fetch is held here, waiting for work."""
        return frozenset(self._fetches.waiting())

    def drain(self, worker_id: str) -> None:
        """The worker takes no new work: answer its held fetch now, empty."""
        self.board.drain(worker_id, self.clock())
        self._fetches.release(worker_id)

    def report(self, worker_id: str, started: Iterable[str], outcomes: Iterable[Outcome]) -> None:
        now = self.clock()
        self._moved(self.board.report(worker_id, started, outcomes, now, record=self._recording))

    def remove_worker(self, worker_id: str, reason: str) -> None:
        if self.board.workers.get(worker_id) is None:
            return
        log.info("subworker removed", worker_id=worker_id, reason=reason)
        self.take(self.board.remove_worker(worker_id, self.clock(), record=self._recording))
        self._fetches.forget(worker_id)
        self.kick()

    def pipe_closed(self, pipe_id: int) -> None:
        for worker_id in self._fetches.on_pipe(pipe_id):
            self.remove_worker(worker_id, "disconnected")

    # --- housekeeping ----------------------------------------------------------------------

    def finished(self, results: Iterable[TaskResult]) -> None:
        """Tell the clients waiting for these results, once the results are durable, and
        the workflows they are steps of."""
        results = list(results)
        self.workflows.finished(results)
        if results:
            self.outbox.when_durable(lambda: self.waiters.resolve(results))

    def kick(self) -> None:
        """Run dispatch (and publish) at the end of this event-loop turn (once, however
        often kicked)."""
        if not self._dispatch_scheduled:
            self._dispatch_scheduled = True
            asyncio.get_running_loop().call_soon(self._dispatch)

    def subscribe(self, backlog: int = DEFAULT_BACKLOG) -> Subscription:
        """Every task transition from now on, as events (see ``events``); raises
        ``TooManySubscriptions`` past ``--max-event-streams``."""
        return self.events.subscribe(backlog)

    def _dispatch(self) -> None:
        self._dispatch_scheduled = False
        try:
            self._assign_ready()
        finally:
            self.outbox.publish()

    def _assign_ready(self) -> None:
        if not self._fetches or not len(self.board.queues):
            return
        now = self.clock()
        plan, effects = self.board.dispatch(self._fetches.waiting(), now, record=self._recording)
        self.take(effects)
        for worker_id, tasks in plan.items():
            if self.dispatch_tracer is not None:
                tasks = self.dispatch_tracer.dispatched(self.view, worker_id, tasks, now)
            self._fetches.answer(worker_id, self.board.deliver(worker_id, tasks))
        if self._fetches:  # workers still wait: a rate limit may hold tasks back
            self.arm_timer()

    def arm_timer(self) -> None:
        """Wake up when the earliest delayed or retrying task is due, or a spent rate limit
        lets a task go (the upkeep loop's once-a-second release is the fallback)."""
        dues = (
            self.board.schedule.next_due(),
            queue_controls.next_limit_due(self.board, self.clock()),
        )
        self._alarm.set(min((d for d in dues if d is not None), default=None))

    def _release_due(self) -> None:
        # Due tasks, or a rate limit's new token: dispatch either way.
        self._moved(self.board.release_due(self.clock(), record=self._recording))

    def maintain(self, *, sweep: bool = True) -> None:
        """Periodic upkeep: drop silent subworkers and (if ``sweep``) expired results and
        dead letters.

        A worker whose fetch is being held is not silent: it is waiting on us.
        """
        now = self.clock()
        due = self.board.release_due(now, record=self._recording)
        self.take(due)
        if due.queued:
            self.kick()
        lost = self.board.end_handover(now, record=self._recording)
        if lost.queued or lost.finished:
            log.info("tasks held in doubt since the takeover, redelivered", count=lost.queued)
            self.take(lost)
            self.kick()
        if sweep:
            self.board.sweep(now)
            self.workflows.sweep()
        for worker_id in self._fetches.holders():
            self.board.touch(worker_id, now)
        late = self.board.time_out_overdue(now, self.heartbeat_timeout, record=self._recording)
        if late.finished:
            log.warning("tasks silent past their time limit failed", count=len(late.finished))
            self.take(late)
            self.kick()
        removed, effects = self.board.expire_silent(
            now, self.heartbeat_timeout, record=self._recording
        )
        for worker_id in removed:
            log.warning("subworker removed", worker_id=worker_id, reason="missed heartbeats")
            self._fetches.forget(worker_id)
        if removed:
            self.take(effects)
            self.kick()

    def close(self) -> None:
        """Stop taking work and answer every held request now."""
        self.accepting = False
        self._alarm.cancel()
        self.waiters.release_all()
        self.workflows.release_all()
        self._fetches.release_all()
