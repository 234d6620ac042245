"""Least-loaded dispatch: which subworker gets the next task.

The worker with the fewest tasks in flight wins; ties go to the one that has been given
the fewest tasks so far, then to the lowest id, so equal workers share work evenly and
the choice is deterministic (and testable).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Load:
    worker_id: str
    in_flight: int
    capacity: int
    assigned_total: int

    @property
    def has_room(self) -> bool:
        return self.in_flight < self.capacity


def least_loaded(candidates: Iterable[Load]) -> str | None:
    """The id of the least-loaded worker with a free slot, or ``None`` if all are full."""
    best = min(
        (c for c in candidates if c.has_room),
        key=lambda c: (c.in_flight, c.assigned_total, c.worker_id),
        default=None,
    )
    return best.worker_id if best is not None else None
