"""What one board operation did that the world outside the board must hear of.

The board decides without I/O; each operation that changes tasks returns an ``Effects``
and the engine acts on it: tells clients and workflows the final results, tells workers
to stop tasks another worker finished, publishes the transitions and journals them.

Transitions are kept only when the caller asks (``record``): building one is the only
cost the hot path would pay for nobody, so without a journal or an event stream the
lists stay empty and an operation costs what it did before effects were returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastworker_control_plane.core.board_types import Change
from fastworker_protocol import TaskResult


@dataclass(slots=True)
class Effects:
    """``record``: whether ``changes`` is kept. ``finished``: tasks that became final,
    in order; ``superseded``: (worker id, task id) of tasks a worker holds that another
    one finished or that ran out of time, for the holder to stop; ``queued``: tasks that
    went (back) to a queue; ``dead_gone``: dead letters retried or purged."""

    record: bool = False
    changes: list[Change] = field(default_factory=list)
    finished: list[TaskResult] = field(default_factory=list)
    superseded: list[tuple[str, str]] = field(default_factory=list)
    queued: int = 0
    dead_gone: list[str] = field(default_factory=list)

    def add(self, other: Effects) -> None:
        """Take in what ``other`` holds (its ``record`` is the caller's business)."""
        self.changes += other.changes
        self.finished += other.finished
        self.superseded += other.superseded
        self.queued += other.queued
        self.dead_gone += other.dead_gone
