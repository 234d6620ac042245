"""The task runner runs every admitted task once, at most ``concurrency`` at a time, sync ones
off the loop in chunks, and on drain gives back what it could not finish without reporting it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from fastworker import Task, TaskRegistry
from fastworker_protocol import Assignment, Outcome
from fastworker_subworker.executor import Executor
from fastworker_subworker.pools import CHUNK_WORK
from fastworker_subworker.runner import PREFETCH_WORK, TaskRunner


class Harness:
    """Probe tasks and the runners' callbacks, collected. ``hold`` blocks its thread on
    ``gate`` and ``ahold`` awaits ``async_gate``; teardown opens both."""

    def __init__(self) -> None:
        self.loop, self.registry = asyncio.get_running_loop(), TaskRegistry()
        self.gate, self.async_gate = threading.Event(), asyncio.Event()
        self.runners, self.finished = list[TaskRunner](), list[Outcome]()
        self.started, self.ids, self.unannounced = list[str](), list[str](), list[str]()
        self.held_after: list[int] = []  # the runner's `held` as each outcome is reported
        self.entered, self.left, self.cancelled = set[str](), set[str](), list[str]()
        self._changed = asyncio.Event()
        tasks: dict[str, Callable[..., Any]] = {
            "echo": lambda value=None: value,
            "sleep": asyncio.sleep,  # sleep(0, x) is x
            "hold": self.hold,
            "ahold": self.ahold,
        }
        for name, fn in tasks.items():
            self.registry.add(Task(fn=fn, name=name))

    def runner(self, concurrency: int = 2) -> TaskRunner:
        runner = TaskRunner(Executor(self.registry), concurrency, self._began, self._ended)
        self.runners.append(runner)
        return runner

    def hold(self, key: str, seconds: float = 5) -> int:
        self.entered.add(key)
        self.gate.wait(seconds)
        self.left.add(key)
        return threading.get_ident()

    async def ahold(self, key: str) -> str:
        self.entered.add(key)
        try:
            await self.async_gate.wait()
        except asyncio.CancelledError:
            self.cancelled.append(key)
            raise
        return key

    def _began(self, ids: list[str]) -> None:
        self.started += ids

    def _ended(self, outcomes: list[Outcome]) -> None:
        self.finished += outcomes
        self.ids += [o.task_id for o in outcomes]
        self.unannounced += [o.task_id for o in outcomes if o.task_id not in self.started]
        self.held_after.append(self.runners[-1].held)
        self.poke()

    def poke(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def until(self, predicate: Callable[[], bool], timeout: float = 5) -> None:
        """Wait for ``predicate``, woken by outcomes and pokes, rechecking every 10 ms."""
        deadline = self.loop.time() + timeout
        while not predicate():
            if (remaining := deadline - self.loop.time()) <= 0:
                raise TimeoutError("condition not reached in time")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(0.01, remaining))

    async def outcomes(self, n: int, timeout: float = 5) -> None:
        await self.until(lambda: len(self.finished) >= n, timeout)


class Waves:
    """Holds each task until ``size`` tasks have entered its wave, counting how many overlap."""

    def __init__(self, h: Harness, size: int) -> None:
        self.h, self.size, self.lock = h, size, threading.Condition()
        self.entered = self.running = self.peak = 0

    def _step(self, by: int) -> int:
        with self.lock:
            self.entered += max(by, 0)
            self.running += by
            self.peak = max(self.peak, self.running)
            self.lock.notify_all()
            target = -(-self.entered // self.size) * self.size
        self.h.loop.call_soon_threadsafe(self.h.poke)
        return target

    def sync(self) -> None:
        target = self._step(1)
        with self.lock:
            filled = self.lock.wait_for(lambda: self.entered >= target, 5)
        threading.Event().wait(3 * CHUNK_WORK)  # linger: catches extra entrants; too slow to chunk
        self._step(-1)
        assert filled, "the wave never filled"

    async def async_(self) -> None:
        target = self._step(1)
        await self.h.until(lambda: self.entered >= target)
        self._step(-1)


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    yield harness
    harness.gate.set()
    harness.async_gate.set()
    for runner in harness.runners:
        await asyncio.wait_for(runner.drain(5), 10)  # lets released threads hand back
        runner.shutdown()


def assign(task_id: str, name: str, *args: Any) -> Assignment:
    return Assignment(id=task_id, name=name, args=list(args))


async def test_every_task_starts_then_finishes_once_and_held_drops_to_zero(h: Harness) -> None:
    runner = h.runner(concurrency=4)
    batch = [assign(f"t{i}", *(("echo", i), ("sleep", 0, i))[i % 2]) for i in range(200)]
    runner.submit(batch)
    assert runner.held == 200
    await h.outcomes(200)
    assert await asyncio.wait_for(runner.drain(5), 10) == []

    assert (runner.held, h.held_after) == (0, sorted(h.held_after, reverse=True))
    assert Counter(h.ids) == Counter(h.started) == Counter(a.id for a in batch)
    assert all(o.ok and o.task_id == f"t{o.result}" for o in h.finished)
    assert h.unannounced == []


@pytest.mark.parametrize("kinds", [["async"], ["sync"], ["async", "sync"]], ids="+".join)
async def test_no_more_than_concurrency_tasks_run_at_once(h: Harness, kinds: list[str]) -> None:
    waves = Waves(h, size=3)
    h.registry.add(Task(fn=waves.async_, name="async"))
    h.registry.add(Task(fn=waves.sync, name="sync"))
    runner = h.runner(concurrency=3)
    runner.submit([assign(f"t{i}", kinds[i % len(kinds)]) for i in range(24)])
    await h.outcomes(24)

    assert [o.error for o in h.finished if not o.ok] == []
    assert waves.peak == 3


async def test_prefetch_is_wanted_after_trivial_tasks_and_not_after_a_slow_one(h: Harness) -> None:
    quick, slow = h.runner(), h.runner()
    assert (quick.mean_duration, quick.prefetch_hint()) == (None, 0)
    quick.submit([assign(f"t{i}", "echo") for i in range(100)])
    await h.outcomes(100)
    slow.submit([assign("slow", "hold", "slow", 4 * PREFETCH_WORK)])  # the gate stays shut
    await h.outcomes(101)

    assert (quick.mean_duration or 0) < PREFETCH_WORK < (slow.mean_duration or 0) / 2
    assert (quick.prefetch_hint() > 0, slow.prefetch_hint()) == (True, 0)  # > 0: mean is known


async def test_queued_trivial_sync_tasks_share_thread_hops_in_chunks(h: Harness) -> None:
    runner, hops = h.runner(), list[object]()
    pool = runner._threads._threads._pool
    submit = pool.submit
    pool.submit = lambda *a: hops.append(a) or submit(*a)  # type: ignore[method-assign,func-returns-value]
    runner.submit([assign("warm-up", "echo")])
    await h.outcomes(1)
    assert runner.mean_duration is not None
    hops.clear()
    runner.submit([assign(f"t{i}", "echo") for i in range(200)])
    await h.outcomes(201)

    assert 0 < len(hops) < 200


async def test_a_slow_sync_task_runs_off_the_loop_and_holds_back_no_async_task(h: Harness) -> None:
    runner = h.runner(2)
    runner.submit([assign("slow", "hold", "slow")])
    await h.until(lambda: "slow" in h.entered)
    runner.submit([assign(f"q{i}", "sleep", 0, i) for i in range(5)])
    await h.outcomes(5)

    assert sorted(h.ids) == [f"q{i}" for i in range(5)]
    h.gate.set()
    await h.outcomes(6)
    assert h.finished[-1].result != threading.get_ident()


async def test_drain_returns_nothing_when_held_tasks_finish_in_time(h: Harness) -> None:
    runner = h.runner(2)
    runner.submit([assign(i, n, i) for i, n in [("a1", "ahold"), ("s1", "hold"), ("s2", "hold")]])
    await h.until(lambda: h.entered == {"a1", "s1"})
    draining = asyncio.create_task(runner.drain(5))
    assert not (await asyncio.wait({draining}, timeout=0.05))[0]
    h.async_gate.set()
    h.gate.set()

    assert await asyncio.wait_for(draining, 10) == []
    assert (sorted(h.ids), runner.held) == (["a1", "s1", "s2"], 0)


async def test_drain_past_its_timeout_cancels_async_and_gives_back_sync_ids(h: Harness) -> None:
    runner = h.runner(2)
    runner.submit([assign("a1", "ahold", "a1"), assign("s1", "hold", "s1")])
    await h.until(lambda: h.entered == {"a1", "s1"})  # both slots are taken: the next two wait
    runner.submit([assign("s2", "hold", "s2"), assign("a2", "ahold", "a2")])
    unfinished = await asyncio.wait_for(runner.drain(0.05), 5)

    assert sorted(unfinished) == ["a1", "a2", "s1", "s2"]
    assert h.cancelled == ["a1"]
    h.gate.set()  # s1 now ends on its thread; its outcome must not be reported
    await h.until(lambda: "s1" in h.left and runner.held == 0)
    await asyncio.sleep(0)
    assert (h.finished, h.started) == ([], ["a1", "s1"])


async def test_shutdown_does_not_wait_for_an_abandoned_sync_task(h: Harness) -> None:
    runner = h.runner(1)
    runner.submit([assign("s1", "hold", "s1")])
    await h.until(lambda: "s1" in h.entered)
    assert await asyncio.wait_for(runner.drain(0.01), 5) == ["s1"]
    runner.shutdown()

    assert h.left == set()  # shutdown returned while s1 still blocks its thread
    h.gate.set()
    await h.until(lambda: "s1" in h.left)
    await asyncio.sleep(0)
    assert h.finished == []


async def test_a_slow_sync_task_holds_back_no_quick_sync_task_queued_around_it(h: Harness) -> None:
    runner = h.runner(2)
    runner.submit([assign("warm", "hold", "warm", 3 * CHUNK_WORK)])  # "hold" is slow
    await h.outcomes(1)
    runner.submit([assign(f"w{i}", "echo") for i in range(20)])  # "echo" is quick
    await h.outcomes(21)
    quick = [assign(f"t{i}", "echo") for i in range(10)]
    runner.submit([*quick[:5], assign("slow", "hold", "slow"), *quick[5:]])

    await h.outcomes(31)  # the slow one's gate stays shut
    assert "slow" not in h.ids
