"""Where the board's transitions go out: the event stream and the journal (replicated,
on a leader), once per event-loop turn in one group commit.

The engine hands every operation's ``Effects`` here (``keep``) and publishes at the end
of the turn or when a reply waits for durability (``persisted``); a workflow decision's
records go in the same commit as the transitions of the tasks it queued or cancelled.
Transitions are asked of the board only while someone listens (``recording``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import structlog

from fastworker_control_plane.core.board_view import BoardView
from fastworker_control_plane.core.effects import Effects
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.workflow_records import WorkflowRecord
from fastworker_control_plane.durability.entries import Recorder
from fastworker_control_plane.durability.errors import NotLeading
from fastworker_control_plane.durability.journal import Journal, JournalError
from fastworker_control_plane.events import EventBus
from fastworker_protocol import ErrorCode

log = structlog.get_logger(__name__)


class Replication(Protocol):
    """What a replicated leader adds to acknowledgements (``ha.leader``)."""

    def after(self, flushed: asyncio.Future[None]) -> asyncio.Future[None]: ...

    def accepts_writes(self) -> bool: ...


_REFUSING = (
    "too few replicas are in sync to acknowledge writes (--require-sync); nothing was "
    "queued: retry later"
)


class Outbox:
    def __init__(self, view: BoardView, events: EventBus, clock: Callable[[], float]) -> None:
        self._events = events
        self._clock = clock
        self.journal: Journal | None = None  # set with --state-dir
        self.replication: Replication | None = None  # set on a replicated leader
        self._recorder = Recorder(view)
        self._unpublished = Effects(record=True)
        self._records: list[WorkflowRecord] = []

    @property
    def recording(self) -> bool:
        """Whether the board's transitions are wanted: a journal or a stream listens."""
        return self.journal is not None or self._events.has_subscribers

    def keep(self, effects: Effects) -> None:
        """Hold an operation's transitions (and dead letters gone) until published."""
        if effects.changes:
            self._unpublished.changes += effects.changes
        if effects.dead_gone and self.journal is not None:
            self._unpublished.dead_gone = [*self._unpublished.dead_gone, *effects.dead_gone]

    def keep_records(self, records: list[WorkflowRecord]) -> None:
        """A workflow decision's records: journaled with the transitions of this turn."""
        if records and self.journal is not None:
            self._records += records

    def check_writable(self) -> None:
        if self.replication is not None and not self.replication.accepts_writes():
            raise Rejected(ErrorCode.UNAVAILABLE, _REFUSING)

    def persisted(self) -> asyncio.Future[None]:
        """Resolves once every transition so far is in the journal (at once without one):
        what a reply that acknowledges them waits for."""
        if self.journal is None:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        self.publish()
        if self.replication is None:
            return self.journal.flushed()
        return self.replication.after(self.journal.flushed())

    def when_durable(self, then: Callable[[], None]) -> None:
        """Run ``then`` once every transition so far is durable (at once without a
        journal); if the journal failed, it is logged and ``then`` runs anyway."""
        if self.journal is None:
            then()
            return

        def persisted(done: asyncio.Future[None]) -> None:
            if not done.cancelled() and done.exception() is not None:
                log.warning("told before it is durable", error=str(done.exception()))
            then()

        self.persisted().add_done_callback(persisted)

    async def durable(self) -> None:
        """Wait for ``persisted``; a journal that cannot be written is an ``internal``
        error for the request (retrying it with the same task ids is safe)."""
        if self.journal is None:
            return
        try:
            await self.persisted()
        except NotLeading as exc:
            raise Rejected(ErrorCode.UNAVAILABLE, f"{exc}: discover the leader and retry") from None
        except JournalError as exc:
            raise Rejected(
                ErrorCode.INTERNAL, f"{exc} (the request took effect in memory only)"
            ) from None

    def publish(self) -> None:
        """Send what was kept to the event stream and the journal."""
        done, records = self._unpublished, self._records
        if done.changes or done.dead_gone or records or self._recorder.behind():
            self._unpublished, self._records = Effects(record=True), []
            if self.journal is not None:
                entries = self._recorder.entries(done.changes, done.dead_gone)
                self.journal.append([*entries, *records])
            if self._events.has_subscribers:
                self._events.publish(done.changes, self._clock())
