"""What one board operation did that the world outside the board must hear of.

The board decides without I/O; each operation that changes tasks returns an ``Effects``
and the engine acts on it: tells clients and workflows the final results, tells workers
to stop tasks another worker finished, publishes the transitions and journals them.

Transitions are kept only when the caller asks (``record``): building one is the only
cost the hot path would pay for nobody, so without a journal or an event stream the
lists stay empty and an operation costs what it did before effects were returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fastworker_control_plane.core.board_types import Change
from fastworker_protocol import TaskResult


@dataclass(slots=True, init=False)
class Effects:
    """``record``: whether ``changes`` is kept. ``finished``: tasks that became final,
    in order; ``superseded``: (worker id, task id) of tasks a worker holds that another
    one finished or that ran out of time, for the holder to stop; ``queued``: tasks that
    went (back) to a queue; ``dead_gone``: dead letters retried or purged."""

    record: bool
    changes: list[Change]
    finished: list[TaskResult]
    superseded: Sequence[tuple[str, str]]  # rare: see ``supersede``
    queued: int
    dead_gone: Sequence[str]

    # Written out, and the rare lists left empty tuples until used: one is made per board
    # operation, and dataclass's own __init__ with four default factories costs twice as
    # much (the hot path's budget is tens of microseconds per task).
    def __init__(self, record: bool = False, *, dead_gone: Sequence[str] = ()) -> None:
        self.record = record
        self.changes = []
        self.finished = []
        self.superseded = ()
        self.queued = 0
        self.dead_gone = dead_gone

    def supersede(self, worker_id: str, task_id: str) -> None:
        """The worker holds a task it must stop (another finished it, or it ran out)."""
        self.superseded = [*self.superseded, (worker_id, task_id)]

    def add(self, other: Effects) -> None:
        """Take in what ``other`` holds (its ``record`` is the caller's business)."""
        self.changes += other.changes
        self.finished += other.finished
        if other.superseded:
            self.superseded = [*self.superseded, *other.superseded]
        self.queued += other.queued
        if other.dead_gone:
            self.dead_gone = [*self.dead_gone, *other.dead_gone]
