"""What operators do through the engine: act on dead letters, pause, purge and limit
queues, add and remove run-time schedules. Each one asks the pure ``core`` modules for
the decision, has the engine act on its effects, and notes the action (``action_log``)
for the event stream."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from fastworker_control_plane.action_log import Action
from fastworker_control_plane.core import dead_letter_ops, queue_controls, runtime_schedules
from fastworker_control_plane.core.limits import Scope
from fastworker_protocol import (
    MAX_FAILED_LISTED,
    FailedFilter,
    FailedList,
    FailedPurged,
    FailedRetried,
    ScheduleAdded,
    ScheduleRemoved,
    ScheduleSpec,
)

if TYPE_CHECKING:
    from fastworker_control_plane.engine import Engine

log = structlog.get_logger(__name__)


class Operations:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._board = engine.board

    def acted(self, kind: str, target: str, source: str, **detail: object) -> Action:
        """Note an operator's action (``action_log``): the event stream sends it."""
        log.info("operator action", action=kind, target=target, source=source, **detail)
        return self._engine.actions.record(kind, target, source, self._engine.clock(), **detail)

    # --- dead letters --------------------------------------------------------------------

    def list_failed(self, filter: FailedFilter, limit: int) -> FailedList:
        """The newest dead letters ``filter`` selects, ``limit`` at most (capped at
        ``MAX_FAILED_LISTED``), cut to fit one reply."""
        limit = min(limit, MAX_FAILED_LISTED)
        return dead_letter_ops.listing(self._board, filter, limit, self._engine.clock())

    def retry_failed(self, filter: FailedFilter, all_matching: bool, source: str) -> FailedRetried:
        """Queue the selected dead letters again as new tasks (``dead_letter_ops``)."""
        self._engine.outbox.check_writable()
        retried, effects = dead_letter_ops.retry(
            self._board,
            filter,
            all_matching,
            self._engine.clock(),
            record=self._engine.outbox.recording,
        )
        self._engine.take(effects)
        if retried.retried:
            target = _target(filter, len(retried.retried))
            self.acted("failed.retry", target, source, count=len(retried.retried))
            self._engine.kick()
            self._engine.arm_timer()
        return retried

    def purge_failed(self, filter: FailedFilter, all_matching: bool, source: str) -> FailedPurged:
        """Drop the selected dead letters."""
        self._engine.outbox.check_writable()
        purged, effects = dead_letter_ops.purge(
            self._board, filter, all_matching, self._engine.clock()
        )
        self._engine.take(effects)
        if purged.purged:
            self.acted("failed.purge", _target(filter, purged.purged), source, count=purged.purged)
            self._engine.kick()  # publishes (journals) the removal
        return purged

    # --- queues and limits ---------------------------------------------------------------

    def pause_queue(self, queue: str, paused: bool) -> None:
        if queue_controls.pause(self._board, queue, paused):
            log.info("queue paused" if paused else "queue resumed", queue=queue)
            self._engine.kick()  # publishes (journals) the change; resumed work goes out

    def purge_queue(self, queue: str) -> int:
        effects = queue_controls.purge(
            self._board, queue, self._engine.clock(), record=self._engine.outbox.recording
        )
        log.info("queue purged", queue=queue, cancelled=len(effects.finished))
        self._engine.take(effects)
        self._engine.kick()
        return len(effects.finished)

    def set_limit(
        self, scope: Scope, name: str, rate: str | None, concurrency: int | None, *, reset: bool
    ) -> None:
        name = queue_controls.set_limit(self._board, scope, name, rate, concurrency, reset=reset)
        log.info("limit changed", scope=str(scope), name=name, rate=rate, concurrency=concurrency)
        self._engine.kick()
        self._engine.arm_timer()

    # --- schedules made at run time ------------------------------------------------------

    def add_schedule(self, spec: ScheduleSpec, source: str) -> ScheduleAdded:
        """Make (or replace) a run-time schedule (``core.runtime_schedules``) and arm its
        first tick; ``source`` is the door the request came in by (``action_log``)."""
        self._engine.outbox.check_writable()
        info, created = runtime_schedules.add(self._board, spec, self._engine.clock())
        self.acted("schedule.add", spec.name, source, task=spec.task, spec=info.spec)
        self._engine.kick()  # publishes (journals) it
        self._engine.arm_timer()
        return ScheduleAdded(schedule=info, created=created)

    def remove_schedule(self, name: str, source: str) -> ScheduleRemoved:
        """Stop a run-time schedule; ``removed`` is false when none had that name."""
        self._engine.outbox.check_writable()
        removed = runtime_schedules.remove(self._board, name)
        self.acted("schedule.remove", name, source, removed=removed)
        self._engine.kick()
        return ScheduleRemoved(name=name, removed=removed)


def _target(selection: FailedFilter, count: int) -> str:
    """What an action on dead letters names: the one id when it acted on one it was
    asked by id, else ``""`` (a selection)."""
    return selection.task_ids[0] if count == 1 and len(selection.task_ids) == 1 else ""
