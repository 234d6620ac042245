"""A sync task's ticket: who gets to decide its fate, its thread or the event loop.

A sync task handed to the thread pool may wait in the pool's queue before a thread takes
it (threads abandoned by earlier timeouts still hold their places). Meanwhile the loop may
give up on it: a cancel, or a drain that hands it back for redelivery. The ticket makes
that race explicit: ``pending`` becomes ``started`` (the thread, just before calling the
function) or ``abandoned`` (the loop), under a lock, whichever comes first. So a task the
loop has reported stopped never starts afterwards, and a task that did start is known to
have started.

It must never block or call back into the loop itself: the runner does that.
"""

from __future__ import annotations

import threading
from enum import Enum

from fastworker_protocol import Assignment


class _State(Enum):
    PENDING = "pending"
    STARTED = "started"
    ABANDONED = "abandoned"


class Ticket:
    __slots__ = ("_lock", "_started", "_state", "assignment")

    def __init__(self, assignment: Assignment) -> None:
        self.assignment = assignment
        self._lock = threading.Lock()
        self._state = _State.PENDING
        self._started = False

    def start(self) -> bool:
        """On the task's thread: claim the start; ``False`` if the loop has given it up."""
        with self._lock:
            if self._state is not _State.PENDING:
                return False
            self._state = _State.STARTED
            self._started = True
            return True

    def abandon(self) -> bool:
        """On the loop: give the task up (its result, if any, is discarded). ``True`` if
        it had not started, and so now never will."""
        with self._lock:
            never_started = self._state is _State.PENDING
            self._state = _State.ABANDONED
            return never_started

    @property
    def abandoned(self) -> bool:
        return self._state is _State.ABANDONED

    @property
    def started(self) -> bool:
        """Whether it ever started (it may have been abandoned since)."""
        return self._started
