"""One injected clock drives every timer of the engine: a test that moves a clock by hand
sees a held fetch run out and a delayed task come due at once, with no real waiting."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.workers import Delivery
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.world import Clock
from fastworker_protocol import Param, Priority, TaskSignature, TaskSpec, TaskState

NOW = 1000.0
HOUR = 3600.0
ADD = TaskSignature(name="add", params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])


@dataclass(order=True)
class Wakeup:
    when: float
    order: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """Time stands still until the test moves it; wake-ups run as it passes them."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now
        self._wakeups: list[Wakeup] = []
        self._order = itertools.count()

    def __call__(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> Wakeup:
        wakeup = Wakeup(when, next(self._order), callback)
        heapq.heappush(self._wakeups, wakeup)
        return wakeup

    def advance(self, seconds: float) -> None:
        self.now += seconds
        while self._wakeups and self._wakeups[0].when <= self.now:
            wakeup = heapq.heappop(self._wakeups)
            if not wakeup.cancelled:
                wakeup.callback()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def engine(clock: ManualClock) -> AsyncIterator[Engine]:
    engine = Engine(TaskBoard(), heartbeat_timeout=HOUR, clock=clock)
    engine.register("w", "host-w", 1, [ADD], pipe_id=-1, local=False)
    yield engine
    engine.close()
    await settle()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_clock_that_can_wake_the_engine_is_a_clock() -> None:
    assert isinstance(ManualClock(), Clock)


async def test_a_held_fetch_runs_out_when_the_clock_passes_its_wait(
    engine: Engine, clock: ManualClock
) -> None:
    # Given a worker whose fetch is held for 30 s with nothing to do
    fetch = asyncio.create_task(engine.fetch("w", wait=30.0))
    await settle()
    assert engine.fetching == {"w"}

    # When the clock moves to just before the end of the wait, Then it is still held
    clock.advance(29.9)
    await settle()
    assert not fetch.done()

    # When it moves past it, Then the fetch is answered, empty, at once
    clock.advance(0.2)
    await settle()
    assert fetch.done()
    assert fetch.result() == Delivery()
    assert engine.fetching == frozenset()


async def test_a_delayed_task_is_queued_and_handed_out_when_the_clock_reaches_its_eta(
    engine: Engine, clock: ManualClock
) -> None:
    # Given a task due in an hour and a worker waiting for work for two
    engine.submit([TaskSpec(name="add", id="later", args=[1], eta=NOW + HOUR)], Priority.NORMAL)
    fetch = asyncio.create_task(engine.fetch("w", wait=2 * HOUR))
    await settle()
    assert engine.lookup("later").status == TaskState.SCHEDULED  # type: ignore[union-attr]

    # When the clock reaches its ETA
    clock.advance(HOUR)
    await settle()

    # Then the engine's timer has queued it and the held fetch got it, with no real wait
    assert fetch.done()
    assert [task.id for task in fetch.result().tasks] == ["later"]
    assert engine.lookup("later").status == TaskState.ASSIGNED  # type: ignore[union-attr]
