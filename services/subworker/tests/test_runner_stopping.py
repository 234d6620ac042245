"""Stopping running tasks: cancellation and timeouts, async and sync, free the slot."""

from __future__ import annotations

import asyncio
import threading
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
        self.registry = TaskRegistry()
        self.registry.add(Task(fn=self.block, name="block"))
        self.registry.add(Task(fn=self.wait, name="wait"))
        self.registry.add(Task(fn=lambda x: x, name="echo"))
        self.runner = TaskRunner(Executor(self.registry), 1, lambda ids: None, self.finished)

    def block(self) -> str:
        self.entered.set()
        self.gate.wait(10)
        return "unblocked"

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
    await asyncio.wait_for(probe.runner.drain(5), 10)
    probe.runner.shutdown()


def assign(task_id: str, name: str, *args: Any, timeout: float | None = None) -> Assignment:
    return Assignment(id=task_id, name=name, args=list(args), timeout=timeout)


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
    p.runner.submit([assign("slow", "wait", "slow", timeout=0.05), assign("next", "echo", 7)])
    timed_out = await p.outcome("slow")
    assert timed_out.error is not None
    assert timed_out.error.reason == "timeout"
    assert (await p.outcome("next")).result == 7


async def test_a_sync_task_past_its_timeout_is_abandoned_and_the_next_task_runs(
    p: Probe,
) -> None:
    p.runner.submit([assign("stuck", "block", timeout=0.05), assign("next", "echo", 8)])
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
