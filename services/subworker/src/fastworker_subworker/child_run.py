"""One chunk of process tasks in one child, from hand-over to the child's last word on it.

The child reports every task of the chunk, in order: ``Done`` or ``Skipped``. So when it
dies, the first task it has not reported is the one it was running (``worker_crashed``)
and the rest never started (they go back to the subworker's queue, to another child).

Stopping a task means terminating its child (the pool does that, in the background, and
replaces it): at its time limit (a task with one runs alone in its chunk, from the
moment an idle child takes it: waiting for a child is not run time), when the child says
the task a cancel names is the one it runs (``Halted``), when the child does not answer a
cancel within ``ANSWER_TIMEOUT`` (a task holding the GIL in C code), and when a drain
gives up. A cancelled task the child has not started is ``Skipped`` by the child itself
and never starts. Either way the outcome is known and reported at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from fastworker_protocol import Assignment, FailureReason, Outcome
from fastworker_subworker import child_wire as wire
from fastworker_subworker.instrument import TaskInstrument
from fastworker_subworker.processes import ChildProcess
from fastworker_subworker.stops import cancelled_before_start, crashed, interrupted, stopped

if TYPE_CHECKING:
    from opentelemetry.trace import Span

ANSWER_TIMEOUT = 1.0  # seconds a busy child gets to answer a cancel before it is terminated
_EXIT_WAIT = 2.0  # seconds to learn how a child that closed its socket ended

Verdict = Callable[[Assignment], Outcome]


class Fate(Enum):
    IDLE = "idle"  # it finished the chunk: it may take another
    TERMINATE = "terminate"  # it must be ended (a limit, a cancel, a drain)
    DIED = "died"  # it is gone


@dataclass
class ChunkEnd:
    fate: Fate
    outcomes: list[tuple[Assignment, Outcome]] = field(default_factory=list)
    unstarted: list[Assignment] = field(default_factory=list)  # to run again, elsewhere
    why: str = ""  # why the child is to be ended, or how it died


class ChildRun:
    def __init__(
        self, child: ChildProcess, chunk: list[Assignment], instrument: TaskInstrument
    ) -> None:
        self._child = child
        self._chunk = chunk
        self._instrument = instrument
        self._left = {a.id: a for a in chunk}  # not reported by the child, in order
        self._spans: dict[str, Span | None] = {}
        self._events: asyncio.Queue[str | None] = asyncio.Queue()  # a task id; None: drain
        self._answer_by: dict[str, float] = {}  # cancels sent -> when the answer is due
        self._cancels: set[str] = set()
        self._outcomes: list[tuple[Assignment, Outcome]] = []
        self._started = time.time()
        self._exit = "its socket closed"

    def cancel(self, task_id: str) -> None:
        """Stop this task of the chunk (reported through ``run``'s end; one cancelled as
        the run ended is among its ``unstarted``: see ``cancelled``)."""
        self._cancels.add(task_id)
        self._events.put_nowait(task_id)

    def cancelled(self, task_id: str) -> bool:
        return task_id in self._cancels

    def interrupt(self) -> list[str]:
        """A drain gives up on the chunk: the child is ended, and the tasks not reported
        yet (returned) are the drain's to hand back: nothing more is reported for them."""
        unreported = list(self._left)
        self._left.clear()
        self._events.put_nowait(None)
        return unreported

    async def run(self) -> ChunkEnd:
        sent = []
        for assignment in self._chunk:
            carried, span = self._instrument.open(assignment)
            self._spans[assignment.id] = span
            sent.append(carried)
        self._child.send(wire.Run(sent))
        self._started = time.time()
        limit = self._chunk[0].time_limit if len(self._chunk) == 1 else None
        deadline = None if limit is None else time.monotonic() + limit
        reading = asyncio.ensure_future(self._child.receive())
        event = asyncio.ensure_future(self._events.get())
        try:
            while True:
                due = [t for t in (deadline, *self._answer_by.values()) if t is not None]
                wait = max(0.0, min(due) - time.monotonic()) if due else None
                done, _ = await asyncio.wait(
                    {reading, event}, timeout=wait, return_when=asyncio.FIRST_COMPLETED
                )
                if event in done:
                    wanted = event.result()
                    if wanted is None:
                        return self._end(Fate.TERMINATE, "a drain gave up on its tasks")
                    self._ask_to_cancel(wanted)
                    event = asyncio.ensure_future(self._events.get())
                if reading in done:
                    message = reading.result()
                    if message is None:
                        self._exit = await self._child.exit_status(_EXIT_WAIT)
                    end = self._on_message(message)
                    if end is not None:
                        return end
                    reading = asyncio.ensure_future(self._child.receive())
                now = time.monotonic()
                if deadline is not None and self._chunk[0].id not in self._left:
                    deadline = None  # done: waiting only for the child's ``Idle``
                if deadline is not None and now >= deadline:
                    assignment = self._chunk[0]
                    self._report(assignment, stopped(assignment, FailureReason.TIMEOUT))
                    return self._end(Fate.TERMINATE, f"task {assignment.id} reached its time limit")
                if any(now >= t for t in self._answer_by.values()):
                    return self._end_running(
                        Fate.TERMINATE, self._unanswered, "it did not answer a cancel"
                    )
        finally:
            reading.cancel()
            event.cancel()

    def _ask_to_cancel(self, task_id: str) -> None:
        if task_id in self._left and task_id not in self._answer_by:
            self._child.send(wire.Cancel(task_id))
            self._answer_by[task_id] = time.monotonic() + ANSWER_TIMEOUT

    def _on_message(self, message: wire.FromChild | None) -> ChunkEnd | None:
        match message:
            case wire.Done(outcome=outcome):
                self._child.tasks_run += 1
                assignment = self._left.get(outcome.task_id)
                if assignment is not None:
                    self._report(assignment, outcome)
            case wire.Skipped(task_id=task_id):
                assignment = self._left.get(task_id)
                if assignment is not None:
                    self._report(assignment, cancelled_before_start(assignment))
            case wire.Halted():
                return self._end_running(Fate.TERMINATE, self._cancelled_running, "a cancel")
            case wire.Idle(rss=rss):
                self._child.rss = rss
                return self._end(Fate.IDLE)
            case None:
                return self._end_running(Fate.DIED, self._crashed, self._exit)
        return None

    def _end_running(self, fate: Fate, verdict: Verdict, why: str) -> ChunkEnd:
        """End the chunk with the first unreported task as the one running."""
        running = next(iter(self._left.values()), None)
        if running is not None:
            self._report(running, verdict(running))
        return self._end(fate, why)

    def _cancelled_running(self, assignment: Assignment) -> Outcome:
        return stopped(assignment, FailureReason.CANCELLED, ran=True)

    def _unanswered(self, assignment: Assignment) -> Outcome:
        """A child that did not answer a cancel is terminated: for the task it ran, that
        is the cancel, or (another task) an interruption, delivered again."""
        if assignment.id in self._answer_by:
            return self._cancelled_running(assignment)
        return interrupted(assignment.id)

    def _crashed(self, assignment: Assignment) -> Outcome:
        self._child.tasks_run += 1
        return crashed(assignment, self._child.pid, self._exit, self._started)

    def _report(self, assignment: Assignment, outcome: Outcome) -> None:
        del self._left[assignment.id]
        self._answer_by.pop(assignment.id, None)
        self._outcomes.append((assignment, outcome))
        self._instrument.close(self._spans.pop(assignment.id, None), outcome, self._child.pid)

    def _end(self, fate: Fate, why: str = "") -> ChunkEnd:
        """The chunk's end: the tasks not reported never started (those being cancelled
        are reported so; the others are to run again)."""
        unstarted = []
        for assignment in list(self._left.values()):
            if assignment.id in self._answer_by:
                self._report(assignment, cancelled_before_start(assignment))
            else:
                unstarted.append(assignment)
        for span in self._spans.values():
            self._instrument.close(span, None)
        return ChunkEnd(fate, self._outcomes, unstarted, why)
