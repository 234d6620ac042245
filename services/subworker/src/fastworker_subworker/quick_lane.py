"""The quick lane: fetch, run a quick sync task, report, all on one blocking thread.

On the loop, a trivial sync task costs four thread hops: the reply of a fetch comes from
an NNG thread to the loop, goes to a task thread, its outcome back to the loop, and the
next fetch out again. Here a thread waits for the reply in C (``BlockingChannel``), runs
the tasks itself and sends the next fetch with their outcomes: one wake-up per reply.

The lane serves only while the exchange (``exchange``, on the loop) lends it the *fetch
role*: the one party of the subworker that asks for work. The exchange lends it when
nothing else is held and the tasks measured are quick; meanwhile the loop only reports
(``Report``, which leaves the lane's held fetch held). The lane gives the role back
(``Handback``) when a reply brings what it does not run itself: a task not known to be
quick (``LANE_QUICK``), not a plain sync one, or with a time limit; a cancel; an error;
or when the loop recalls it (a drain). Whatever it holds goes back with the role: tasks
received and not run, outcomes not yet sent, batches not yet confirmed, the error.

A quick task may still block. One that runs longer than ``STUCK`` is *detached* by the
loop: the loop takes the role and what the lane held, so fetching (the heartbeat) and the
other slots go on, and adopts the running task into the thread pool, which reports it
(or gives it up, if cancelled or drained) like its own. The lane's thread then only hands
that task's outcome over and waits to be lent the role again.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fastworker_protocol import Assignment, Outcome
from fastworker_subworker.executor import Executor
from fastworker_subworker.link import ControlPlaneLink
from fastworker_subworker.pools import Durations
from fastworker_subworker.ticket import Ticket

LANE_QUICK = 0.0005  # seconds: a task name measured under this runs on the lane itself
STUCK = 0.05  # seconds a task may run on the lane before it is detached


@dataclass
class Handback:
    """What comes back with the fetch role."""

    tasks: list[Assignment] = field(default_factory=list)  # received and not run
    cancel: list[str] = field(default_factory=list)
    started: list[str] = field(default_factory=list)  # not yet sent
    outcomes: list[Outcome] = field(default_factory=list)  # not yet sent
    received: list[int] = field(default_factory=list)  # batches not yet confirmed
    error: Exception | None = None  # why the last fetch failed (it carried ``outcomes``)
    detached: Ticket | None = None  # still running on the lane's thread
    detached_outcome: asyncio.Future[list[Outcome]] | None = None  # its outcome, later


class QuickLane:
    def __init__(
        self,
        executor: Executor,
        durations: Durations,
        prefetch: Callable[[], int],
        fetch_wait: float,
        on_handback: Callable[[Handback], None],
    ) -> None:
        self._executor = executor
        self._durations = durations
        self._prefetch = prefetch
        self._fetch_wait = fetch_wait
        self._on_handback = on_handback
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop that lends the role
        self._context = contextvars.Context()  # each task runs in a copy of the loop's
        self._resume = threading.Event()
        self._thread: threading.Thread | None = None
        self._tickets = threading.Lock()
        # Shared with the thread, under ``_lock``:
        self._lock = threading.Lock()
        self._link: ControlPlaneLink | None = None
        self._serving = False  # the thread has the role, or a detached task
        self._recalled = False
        self._closed = False
        self._started: list[str] = []  # only what the role was lent with
        self._outcomes: list[Outcome] = []
        self._received: list[int] = []
        self._running: Ticket | None = None
        self._rest: list[Assignment] = []  # received behind the running task
        self._since = 0.0  # when the running task started (``time.monotonic()``)
        self._detached: asyncio.Future[list[Outcome]] | None = None
        self.lent = False  # the loop's view: the lane has the role (loop only)
        self.ran = 0  # tasks run on the lane (written by its thread only)

    # --- the loop's side -------------------------------------------------------------------

    def quick(self, assignment: Assignment) -> bool:
        """Whether the lane runs this task itself."""
        if assignment.time_limit is not None or self._executor.pool_of(assignment) != "thread":
            return False
        expected = self._durations.expected(assignment.name)
        return expected is not None and expected < LANE_QUICK

    @property
    def free(self) -> bool:
        """The thread can take the role (it is not still running a detached task)."""
        return not self.lent and not self._serving and not self._closed

    def lend(
        self,
        link: ControlPlaneLink,
        started: list[str],
        outcomes: list[Outcome],
        received: list[int],
    ) -> None:
        """Give the lane the fetch role, with the news its first fetch carries."""
        assert self.free
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._context = contextvars.copy_context()
        with self._lock:
            self._link = link
            self._started, self._outcomes, self._received = started, outcomes, received
            self._recalled = False
            self._serving = True
        self.lent = True
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="fastworker-lane", daemon=True)
            self._thread.start()
        self._resume.set()

    def detach_if_stuck(self) -> Handback | None:
        """Take the role back if a task has run past ``STUCK`` (see the module's doc)."""
        with self._lock:
            if self._running is None or time.monotonic() - self._since < STUCK:
                return None
            return self._detach()

    def recall(self) -> Handback | None:
        """Ask for the role back: now if a task is running (detached), else once the fetch
        in progress ends (``on_handback`` then gets it)."""
        with self._lock:
            self._recalled = True
            return self._detach() if self._running is not None else None

    def _detach(self) -> Handback:
        ticket, self._running = self._running, None
        assert self._loop is not None
        future = self._detached = self._loop.create_future()
        back = Handback(
            self._rest, [], self._started, self._outcomes, self._received, None, ticket, future
        )
        self._rest, self._started, self._outcomes, self._received = [], [], [], []
        self.lent = False
        return back

    def close(self) -> None:
        """Stop the thread once it is back (``ControlPlaneLink.close`` ends a fetch)."""
        with self._lock:
            self._closed = True
            self._recalled = True
        self._resume.set()

    # --- the lane's thread -----------------------------------------------------------------

    def _work(self) -> None:
        while True:
            self._resume.wait()
            self._resume.clear()
            if self._closed:
                return
            try:
                back = self._serve()
            finally:
                with self._lock:
                    self._serving = False
            if back is not None:
                assert self._loop is not None
                with contextlib.suppress(RuntimeError):  # the loop has closed
                    self._loop.call_soon_threadsafe(self._handed_back, back)

    def _handed_back(self, back: Handback) -> None:
        self.lent = False
        self._on_handback(back)

    def _serve(self) -> Handback | None:
        """Fetch and run until the role goes back: a ``Handback``, or ``None`` if the loop
        detached a task (and so took the rest already)."""
        link = self._link
        assert link is not None
        while True:
            with self._lock:
                if self._recalled:
                    return self._give_back([], [])
                started, self._started = self._started, []
                outcomes, self._outcomes = self._outcomes, []
                received, self._received = self._received, []
            try:
                reply = link.fetch_blocking(
                    self._fetch_wait, self._prefetch(), started, outcomes, received
                )
            except Exception as exc:  # the loop's exchange knows what each failure means
                return Handback(started=started, outcomes=outcomes, received=received, error=exc)
            with self._lock:
                if reply.batch:
                    self._received.append(reply.batch)
                if reply.cancel or self._recalled:
                    return self._give_back(reply.tasks, reply.cancel)
            stopped, back = self._run(reply.tasks)
            if stopped:
                return back

    def _run(self, tasks: list[Assignment]) -> tuple[bool, Handback | None]:
        """Run ``tasks`` here. Stops at the first not quick (giving it and the rest back)
        or once the loop has detached one (which took the rest)."""
        for i, task in enumerate(tasks):
            ticket = Ticket(task, self._tickets)
            with self._lock:
                if self._recalled or not self.quick(task):
                    return True, self._give_back(tasks[i:], [])
                self._running, self._rest, self._since = ticket, tasks[i + 1 :], time.monotonic()
            outcome = None
            if ticket.start():  # the loop may have detached it and given it up already
                outcome = self._context.copy().run(self._executor.run_sync, task)
            with self._lock:
                detached, self._detached = self._detached, None
                if detached is None:
                    self._running, self._rest = None, []
                    if outcome is not None:
                        self._outcomes.append(outcome)
            if detached is not None:
                with contextlib.suppress(RuntimeError):  # the loop has closed
                    detached.get_loop().call_soon_threadsafe(_settle, detached, outcome)
                return True, None
            if outcome is not None:
                self.ran += 1
                self._durations.measure([(task, outcome)])
        return False, None

    def _give_back(self, tasks: list[Assignment], cancel: list[str]) -> Handback:
        """Under ``_lock``: everything the lane holds, with ``tasks`` and ``cancel``."""
        back = Handback(list(tasks), list(cancel), self._started, self._outcomes, self._received)
        self._started, self._outcomes, self._received = [], [], []
        return back


def _settle(future: asyncio.Future[list[Outcome]], outcome: Outcome | None) -> None:
    if not future.done():
        future.set_result([] if outcome is None else [outcome])
