"""One chunk in one child, seen from the subworker (``ChildRun``), against a fake child
whose words the test gives: what each task's outcome is, which tasks never started, and
whether the child may take another chunk or must be ended."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest

from fastworker_protocol import Assignment, FailureReason, Outcome
from fastworker_subworker import child_run, child_wire
from fastworker_subworker.child_run import ChildRun, ChunkEnd, Fate
from fastworker_subworker.instrument import TaskInstrument
from fastworker_subworker.processes import ChildProcess

PID = 4321


class FakeChild:
    """What ``ChildRun`` uses of a ``ChildProcess``: the test says what the child says
    (``None``: its socket closed), and reads what it was sent, in order."""

    def __init__(self, exit_status: str = "exit code 1") -> None:
        self.pid = PID
        self.tasks_run = 0
        self.rss = 0
        self.said: asyncio.Queue[child_wire.FromChild | None] = asyncio.Queue()
        self.sent: asyncio.Queue[child_wire.ToChild] = asyncio.Queue()
        self.status = exit_status
        self.reads = 0  # calls of ``receive``: the messages before the last one are handled
        self._read = asyncio.Event()

    def send(self, message: child_wire.ToChild) -> None:
        self.sent.put_nowait(message)

    async def receive(self) -> child_wire.FromChild | None:
        self.reads += 1
        self._read.set()
        return await self.said.get()

    async def exit_status(self, timeout: float) -> str:
        return self.status

    def says(self, *messages: child_wire.FromChild | None) -> None:
        for message in messages:
            self.said.put_nowait(message)

    async def next_sent(self) -> child_wire.ToChild:
        return await asyncio.wait_for(self.sent.get(), 5)

    async def handled(self, count: int) -> None:
        """Wait until the run has handled the first ``count`` messages the child said (it
        asks for the next one)."""

        async def asked() -> None:
            while self.reads <= count:
                self._read.clear()
                await self._read.wait()

        await asyncio.wait_for(asked(), 5)


def assign(task_id: str, time_limit: float | None = None) -> Assignment:
    return Assignment(id=task_id, name="work", time_limit=time_limit)


def done(task_id: str, result: Any = None) -> child_wire.Done:
    return child_wire.Done(Outcome(task_id=task_id, ok=True, result=result))


async def started(
    chunk: list[Assignment], fake: FakeChild
) -> tuple[ChildRun, asyncio.Task[ChunkEnd]]:
    """The chunk handed to the child: the ``Run`` it was sent is checked."""
    run = ChildRun(cast(ChildProcess, fake), chunk, TaskInstrument("w"))
    ending = asyncio.ensure_future(run.run())
    assert await fake.next_sent() == child_wire.Run(chunk)
    return run, ending


async def ended(ending: asyncio.Task[ChunkEnd]) -> ChunkEnd:
    return await asyncio.wait_for(ending, 5)


def ids(end: ChunkEnd) -> list[str]:
    return [assignment.id for assignment, _ in end.outcomes]


def error_of(end: ChunkEnd, task_id: str) -> tuple[str, str, str]:
    [outcome] = [o for a, o in end.outcomes if a.id == task_id]
    assert outcome.task_id == task_id
    assert not outcome.ok
    assert outcome.error is not None
    return outcome.error.type, outcome.error.reason, outcome.error.message


async def test_a_chunk_the_child_finishes_gives_every_outcome_in_order_and_an_idle_child() -> None:
    fake = FakeChild()
    chunk = [assign("a"), assign("b"), assign("c")]
    _, ending = await started(chunk, fake)

    fake.says(done("a", 1), done("b", 2), done("c", 3), child_wire.Idle(rss=5 << 20))
    end = await ended(ending)

    assert end.fate == Fate.IDLE
    assert [(a.id, o.result) for a, o in end.outcomes] == [("a", 1), ("b", 2), ("c", 3)]
    assert [a for a, _ in end.outcomes] == chunk
    assert end.unstarted == []
    assert (fake.tasks_run, fake.rss) == (3, 5 << 20)


async def test_a_cancelled_task_the_child_skips_is_cancelled_before_it_started() -> None:
    # Given a chunk of two in a child
    fake = FakeChild()
    run, ending = await started([assign("a"), assign("b")], fake)

    # When the second is cancelled
    run.cancel("b")

    # Then the child is asked to cancel it
    assert await fake.next_sent() == child_wire.Cancel("b")
    # And when the child skips it, finishes the other and goes idle
    fake.says(child_wire.Skipped("b"), done("a"), child_wire.Idle(rss=1))
    end = await ended(ending)
    # Then it is cancelled before it started, and the child may take another chunk
    assert end.fate == Fate.IDLE
    assert ids(end) == ["b", "a"]
    assert error_of(end, "b") == (
        "Cancelled",
        FailureReason.CANCELLED,
        "the task was cancelled before it started",
    )
    assert end.unstarted == []
    assert fake.tasks_run == 1  # a skipped task did not run


async def test_a_cancel_of_a_task_no_longer_in_the_chunk_is_not_sent() -> None:
    fake = FakeChild()
    run, ending = await started([assign("a"), assign("b")], fake)
    fake.says(done("a"))
    await fake.handled(1)

    run.cancel("a")
    run.cancel("b")
    run.cancel("b")  # asked twice: one Cancel

    assert await fake.next_sent() == child_wire.Cancel("b")
    fake.says(done("b"), child_wire.Idle(rss=1))
    end = await ended(ending)
    assert end.fate == Fate.IDLE
    assert fake.sent.empty()
    assert [o.ok for _, o in end.outcomes] == [True, True]


async def test_a_cancel_the_child_halts_on_ends_that_task_and_hands_back_the_rest() -> None:
    # Given a chunk of four, the first done
    fake = FakeChild()
    run, ending = await started([assign("a"), assign("b"), assign("c"), assign("d")], fake)
    fake.says(done("a"))

    # When the second is cancelled and the child says it is the one it runs
    run.cancel("b")
    assert await fake.next_sent() == child_wire.Cancel("b")
    fake.says(child_wire.Halted("b"))
    end = await ended(ending)

    # Then the child is to be terminated, the task was cancelled while it ran, and the
    # ones behind it never started: they are to run again
    assert end.fate == Fate.TERMINATE
    assert ids(end) == ["a", "b"]
    assert error_of(end, "b") == (
        "Cancelled",
        FailureReason.CANCELLED,
        "the task was cancelled while it ran",
    )
    assert [a.id for a in end.unstarted] == ["c", "d"]
    assert end.why == "a cancel"


async def test_a_child_gone_mid_chunk_crashes_the_task_it_ran_and_hands_back_the_rest() -> None:
    # Given a chunk of three in a child
    fake = FakeChild(exit_status="signal SIGSEGV")
    _, ending = await started([assign("a"), assign("b"), assign("c")], fake)

    # When the child reports the first, then its socket closes
    fake.says(done("a"), None)
    end = await ended(ending)

    # Then it is dead; the second task, the one it ran, crashed; the third never started
    assert end.fate == Fate.DIED
    assert ids(end) == ["a", "b"]
    kind, reason, message = error_of(end, "b")
    assert (kind, reason) == ("WorkerCrashed", FailureReason.WORKER_CRASHED)
    assert message == f"the child process (pid {PID}) running the task died: signal SIGSEGV"
    assert [a.id for a in end.unstarted] == ["c"]
    assert end.why == "signal SIGSEGV"
    assert fake.tasks_run == 2  # the crashed task counts against --max-tasks-per-child
    crashed = end.outcomes[1][1]
    assert crashed.started_at is not None
    assert crashed.finished_at is not None


async def test_a_child_gone_after_its_last_report_crashes_no_task() -> None:
    fake = FakeChild()
    _, ending = await started([assign("a")], fake)

    fake.says(done("a"), None)  # before its Idle
    end = await ended(ending)

    assert end.fate == Fate.DIED
    assert [o.ok for _, o in end.outcomes] == [True]
    assert end.unstarted == []


async def test_a_task_past_its_time_limit_times_out_and_its_child_is_to_be_terminated() -> None:
    fake = FakeChild()
    _, ending = await started([assign("slow", time_limit=0.05)], fake)

    end = await ended(ending)  # the child never reports it

    assert end.fate == Fate.TERMINATE
    assert error_of(end, "slow") == (
        "Timeout",
        FailureReason.TIMEOUT,
        "the task ran longer than its 0.05 s timeout",
    )
    assert end.unstarted == []
    assert end.why == "task slow reached its time limit"


class FakeClock:
    """``child_run``'s ``time``: a monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return time.time()


async def test_a_task_done_when_its_time_limit_passes_is_not_timed_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a task with a 30 s limit, on a clock the test moves
    clock = FakeClock()
    monkeypatch.setattr(child_run, "time", clock)
    fake = FakeChild()
    _, ending = await started([assign("quick", time_limit=30.0)], fake)

    # When its Done arrives once the limit is behind it (read in the same wake-up)
    clock.now += 31.0
    fake.says(done("quick", "in time"))
    await fake.handled(1)
    # Then the child is not terminated: the run waits for its Idle
    assert not ending.done()
    fake.says(child_wire.Idle(rss=1))
    end = await ended(ending)
    assert end.fate == Fate.IDLE
    assert [(a.id, o.ok, o.result) for a, o in end.outcomes] == [("quick", True, "in time")]


async def test_a_cancel_of_the_running_task_the_child_never_answers_terminates_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(child_run, "ANSWER_TIMEOUT", 0.05)
    fake = FakeChild()
    run, ending = await started([assign("a"), assign("b")], fake)

    run.cancel("a")
    end = await ended(ending)  # the child, busy in C code, says nothing

    assert fake.sent.get_nowait() == child_wire.Cancel("a")
    assert end.fate == Fate.TERMINATE
    assert end.why == "it did not answer a cancel"
    assert ids(end) == ["a"]
    assert error_of(end, "a")[1:] == (
        FailureReason.CANCELLED,
        "the task was cancelled while it ran",
    )
    assert [a.id for a in end.unstarted] == ["b"]


async def test_an_unanswered_cancel_of_a_waiting_task_hands_back_the_running_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a chunk of three whose first task holds the child
    monkeypatch.setattr(child_run, "ANSWER_TIMEOUT", 0.05)
    fake = FakeChild()
    run, ending = await started([assign("a"), assign("b"), assign("c")], fake)

    # When the second is cancelled and the child does not answer
    run.cancel("b")
    end = await ended(ending)

    # Then the child is to be terminated; the running task is interrupted (to be delivered
    # again), the cancelled one never started, and the last is to run again
    assert end.fate == Fate.TERMINATE
    assert ids(end) == ["a", "b"]
    interrupted = end.outcomes[0][1]
    assert interrupted.requeue
    assert interrupted.error is not None
    assert interrupted.error.reason == FailureReason.INTERRUPTED
    assert error_of(end, "b")[1:] == (
        FailureReason.CANCELLED,
        "the task was cancelled before it started",
    )
    assert [a.id for a in end.unstarted] == ["c"]


async def test_an_interrupted_run_reports_none_of_the_tasks_it_hands_back() -> None:
    # Given a chunk of three, the first reported
    fake = FakeChild()
    run, ending = await started([assign("a"), assign("b"), assign("c")], fake)
    fake.says(done("a"))
    await fake.handled(1)

    # When a drain gives up on it
    unreported = run.interrupt()

    # Then the tasks not reported are the drain's, and the run reports none of them
    assert unreported == ["b", "c"]
    end = await ended(ending)
    assert end.fate == Fate.TERMINATE
    assert ids(end) == ["a"]
    assert end.unstarted == []
    assert end.why == "a drain gave up on its tasks"


async def test_a_run_interrupted_before_any_report_hands_back_all_of_its_chunk() -> None:
    fake = FakeChild()
    run, ending = await started([assign("a"), assign("b")], fake)
    run.cancel("a")
    assert await fake.next_sent() == child_wire.Cancel("a")

    assert run.interrupt() == ["a", "b"]

    end = await ended(ending)
    assert (end.fate, end.outcomes, end.unstarted) == (Fate.TERMINATE, [], [])
