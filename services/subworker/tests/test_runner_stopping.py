"""Stopping running tasks: cancellation and timeouts, async and sync, free the slot."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fastworker import Task, TaskRegistry
from fastworker_protocol import Assignment, Outcome
from fastworker_subworker.executor import Executor
from fastworker_subworker.runner import TaskRunner


class Probe:
    def __init__(self) -> None:
        self.outcomes: dict[str, Outcome] = {}
        self.gate, self.entered = threading.Event(), threading.Event()
        self.waiting, self.changed = asyncio.Event(), asyncio.Event()
        self.cancelled: list[str] = []
        self.began: list[str] = []  # keys of the `park` calls that started, on their threads
        self.gates: dict[str, threading.Event] = {}  # `park(key)` waits for gates[key]
        self.announced: list[str] = []  # ids the runner said had started
        self.registry = TaskRegistry()
        self.registry.add(Task(fn=self.block, name="block"))
        self.registry.add(Task(fn=self.wait, name="wait"))
        self.registry.add(Task(fn=self.park, name="park"))
        self.registry.add(Task(fn=time.sleep, name="doze"))
        self.registry.add(Task(fn=lambda x: x, name="echo"))  # type: ignore[misc]
        # One slot, so the pool has 1 * 2 + 2 = 4 threads.
        self.runner = TaskRunner(Executor(self.registry), 1, self.announced.extend, self.finished)

    def block(self) -> str:
        self.entered.set()
        self.gate.wait(10)
        return "unblocked"

    def park(self, key: str) -> str:
        self.began.append(key)
        self.gate_of(key).wait(10)
        return key

    def gate_of(self, key: str) -> threading.Event:
        return self.gates.setdefault(key, threading.Event())

    async def wait(self, key: str) -> None:
        self.waiting.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(key)
            raise

    def finished(self, outcomes: list[Outcome]) -> None:
        self.outcomes.update({o.task_id: o for o in outcomes})
        self.changed.set()

    async def outcome(self, task_id: str) -> Outcome:
        async def arrived() -> Outcome:
            while task_id not in self.outcomes:
                self.changed.clear()
                await self.changed.wait()
            return self.outcomes[task_id]

        return await asyncio.wait_for(arrived(), 5)


@pytest.fixture
async def p() -> AsyncIterator[Probe]:
    probe = Probe()
    yield probe
    probe.gate.set()
    for gate in list(probe.gates.values()):
        gate.set()
    await asyncio.wait_for(probe.runner.drain(5), 10)
    probe.runner.shutdown()


def assign(task_id: str, name: str, *args: Any, time_limit: float | None = None) -> Assignment:
    return Assignment(id=task_id, name=name, args=list(args), time_limit=time_limit)


async def test_a_cancelled_async_task_sees_cancelled_error_and_reports_cancelled(
    p: Probe,
) -> None:
    p.runner.submit([assign("a", "wait", "a")])
    await asyncio.wait_for(p.waiting.wait(), 5)
    p.runner.cancel(["a"])
    outcome = await p.outcome("a")
    assert outcome.error is not None
    assert outcome.error.reason == "cancelled"
    assert p.cancelled == ["a"]
    assert p.runner.held == 0


async def test_an_async_task_past_its_timeout_reports_timeout_and_frees_the_slot(
    p: Probe,
) -> None:
    p.runner.submit([assign("slow", "wait", "slow", time_limit=0.05), assign("next", "echo", 7)])
    timed_out = await p.outcome("slow")
    assert timed_out.error is not None
    assert timed_out.error.reason == "timeout"
    assert (await p.outcome("next")).result == 7


async def test_a_sync_task_past_its_timeout_is_abandoned_and_the_next_task_runs(
    p: Probe,
) -> None:
    p.runner.submit([assign("stuck", "block", time_limit=0.05), assign("next", "echo", 8)])
    timed_out = await p.outcome("stuck")
    assert timed_out.error is not None
    assert timed_out.error.reason == "timeout"
    assert (await p.outcome("next")).result == 8  # while "stuck" still blocks its thread
    assert not p.gate.is_set()


async def test_a_cancelled_running_sync_task_reports_cancelled_and_its_result_is_dropped(
    p: Probe,
) -> None:
    p.runner.submit([assign("stuck", "block")])
    assert await asyncio.to_thread(p.entered.wait, 5)
    p.runner.cancel(["stuck"])
    assert (await p.outcome("stuck")).error.reason == "cancelled"  # type: ignore[union-attr]
    p.outcomes.clear()
    p.gate.set()  # the thread finishes now; its result must go nowhere
    p.runner.submit([assign("after", "echo", 1)])
    await p.outcome("after")
    assert "stuck" not in p.outcomes


async def test_a_cancelled_queued_task_never_runs(p: Probe) -> None:
    p.runner.submit([assign("first", "block"), assign("queued", "echo", 1)])
    assert await asyncio.to_thread(p.entered.wait, 5)
    p.runner.cancel(["queued"])
    assert (await p.outcome("queued")).error.reason == "cancelled"  # type: ignore[union-attr]
    p.gate.set()
    assert (await p.outcome("first")).result == "unblocked"
    assert p.outcomes["queued"].ok is False


async def behind_stragglers(p: Probe, late: Assignment) -> None:
    """Given the pool's four threads held by ``park`` tasks abandoned by their timeout, and
    ``late`` (queued behind them) handed to the pool: the one lane does that as soon as the
    last one's outcome is out."""
    stuck = [assign(f"stuck{i}", "park", f"stuck{i}", time_limit=0.05) for i in range(4)]
    p.runner.submit([*stuck, late])
    for assignment in stuck:
        assert (await p.outcome(assignment.id)).error.reason == "timeout"  # type: ignore[union-attr]


async def test_a_sync_task_cancelled_while_waiting_for_a_thread_is_reported_and_never_starts(
    p: Probe,
) -> None:
    # Given a task waiting for a thread, behind four abandoned ones
    p.gate_of("late").set()  # it would not block, were it started
    await behind_stragglers(p, assign("late", "park", "late", time_limit=0.05))
    # When it is cancelled
    p.runner.cancel(["late"])
    # Then it is reported cancelled at once
    cancelled = await p.outcome("late")
    assert cancelled.error is not None
    assert cancelled.error.reason == "cancelled"
    # And when one thread frees up, it never starts: that thread takes it from the pool's
    # queue first, then the next task
    p.gate_of("stuck0").set()
    p.runner.submit([assign("after", "echo", 1)])
    assert (await p.outcome("after")).result == 1
    assert "late" not in p.began
    assert "late" not in p.announced
    assert cancelled.error.message == "the task was cancelled before it started"


async def test_a_sync_tasks_timeout_runs_from_its_start_not_while_it_waits_for_a_thread(
    p: Probe,
) -> None:
    # Given three threads held for good and a fourth held for a second after its timeout
    stuck = [assign(f"stuck{i}", "park", f"stuck{i}", time_limit=0.05) for i in range(3)]
    p.runner.submit([*stuck, assign("busy", "doze", 1.0, time_limit=0.05)])
    assert (await p.outcome("busy")).error.reason == "timeout"  # type: ignore[union-attr]
    # When a quick task with a 0.2 s timeout waits about a second for that thread
    p.runner.submit([assign("late", "echo", "ran", time_limit=0.2)])
    # Then it runs to the end: the wait did not count against its timeout
    late = await p.outcome("late")
    assert (late.ok, late.result) == (True, "ran")
    assert p.announced.index("late") > p.announced.index("busy")


async def test_a_sync_task_waiting_for_a_thread_at_a_drain_is_handed_back_and_never_starts(
    p: Probe,
) -> None:
    # Given a task without a timeout waiting for a thread
    p.gate_of("late").set()
    await behind_stragglers(p, assign("late", "park", "late"))
    # When the runner drains with no time left
    unfinished = await p.runner.drain(0)
    # Then it is handed back, and it never starts once threads free up
    assert unfinished == ["late"]
    p.gate_of("stuck0").set()
    p.runner.submit([assign("after", "echo", 2)])
    assert (await p.outcome("after")).result == 2
    assert "late" not in p.began
    assert "late" not in p.outcomes
