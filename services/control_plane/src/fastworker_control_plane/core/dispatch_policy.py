"""Dispatch policy: which subworker gets the next task, and which tasks may wait in a
subworker's prefetch buffer.

The worker with the fewest tasks in flight wins; ties go to the one that has been given
the fewest tasks so far, then to the lowest id, so equal workers share work evenly and
the choice is deterministic (and testable). Only tasks of names measured as quick may
fill a buffer: a slow task waiting there could have started on another worker.
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


# Tasks of a name that ran this long on average or less may wait in a worker's prefetch
# buffer (slower ones, and names never measured, go only into free slots).
QUICK_RUN = 0.01
_WEIGHT = 0.2  # of the newest run in the moving average


class RunTimes:
    """Per task name, a moving average of how long its runs take; ``quick`` holds the
    names at or under ``QUICK_RUN``."""

    def __init__(self) -> None:
        self._means: dict[str, float] = {}
        self.quick: set[str] = set()

    def observe(self, name: str, seconds: float) -> None:
        mean = self._means.get(name)
        mean = seconds if mean is None else mean + _WEIGHT * (seconds - mean)
        self._means[name] = mean
        if mean <= QUICK_RUN:
            self.quick.add(name)
        else:
            self.quick.discard(name)
