"""A sync task's ticket: the thread's start and the loop's abandon race under a lock, and
whichever comes first decides."""

from __future__ import annotations

import threading

from fastworker_protocol import Assignment
from fastworker_subworker.ticket import Ticket


def ticket() -> Ticket:
    return Ticket(Assignment(id="t", name="n"), threading.Lock())


def test_a_pending_ticket_is_started_by_its_thread() -> None:
    t = ticket()
    assert t.start() is True
    assert (t.started, t.abandoned) == (True, False)


def test_a_ticket_abandoned_before_its_thread_comes_never_starts() -> None:
    t = ticket()
    assert t.abandon() is True  # it had not started, so now it never will
    assert t.start() is False
    assert (t.started, t.abandoned) == (False, True)


def test_a_started_ticket_can_be_abandoned_but_stays_known_to_have_started() -> None:
    t = ticket()
    t.start()
    assert t.abandon() is False  # too late to prevent the start: only its result is dropped
    assert (t.started, t.abandoned) == (True, True)
    assert t.start() is False


def test_abandoning_twice_changes_nothing() -> None:
    t = ticket()
    t.abandon()
    assert t.abandon() is False
    assert t.abandoned
