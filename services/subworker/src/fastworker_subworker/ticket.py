"""A sync task's ticket: who gets to decide its fate, its thread or the event loop.

A sync task handed to the thread pool may wait in the pool's queue before a thread takes
it (threads abandoned by earlier timeouts still hold their places). Meanwhile the loop may
give up on it: a cancel, or a drain that hands it back for redelivery. The ticket makes
that race explicit: ``pending`` becomes ``started`` (the thread, just before calling the
function) or ``abandoned`` (the loop), under a lock, whichever comes first. So a task the
loop has reported stopped never starts afterwards, and a task that did start is known to
have started.

It must never block or call back into the loop itself: ``thread_pool`` does that. Every sync
task gets one, so it is kept cheap: small-int states, and a lock shared by all the tickets
of a thread pool (each holds it only for a check-and-set).
"""

from __future__ import annotations

import threading

from fastworker_protocol import Assignment

_PENDING, _STARTED, _ABANDONED = 0, 1, 2


class Ticket:
    __slots__ = ("_lock", "_state", "assignment", "started")

    def __init__(self, assignment: Assignment, lock: threading.Lock) -> None:
        self.assignment = assignment
        self._lock = lock
        self._state = _PENDING
        self.started = False  # whether it ever started (it may be abandoned since)

    def start(self) -> bool:
        """On the task's thread: claim the start; ``False`` if the loop has given it up."""
        with self._lock:
            if self._state != _PENDING:
                return False
            self._state = _STARTED
            self.started = True
            return True

    def abandon(self) -> bool:
        """On the loop: give the task up (its result, if any, is discarded). ``True`` if
        it had not started, and so now never will."""
        with self._lock:
            never_started = self._state == _PENDING
            self._state = _ABANDONED
            return never_started

    @property
    def abandoned(self) -> bool:
        return self._state == _ABANDONED
