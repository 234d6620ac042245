"""Supervised tasks: one that ends before the control plane stops (raising, returning or
cancelled) is a fault, reported once with its cleanup run; after ``stop`` ends are fine."""

from __future__ import annotations

import asyncio

import pytest

from fastworker_control_plane.supervision import Fault, Supervisor, TaskDied


class Recorded:
    def __init__(self) -> None:
        self.faults: list[Fault] = []
        self.cleaned: list[BaseException] = []
        self.reported = asyncio.Event()

    def fault(self, fault: Fault) -> None:
        self.faults.append(fault)
        self.reported.set()


async def crash() -> None:
    raise RuntimeError("a bug")


async def finish() -> None:
    return None


async def test_a_task_that_raises_is_a_fault_with_its_cleanup_run() -> None:
    seen = Recorded()
    supervisor = Supervisor(seen.fault)
    supervisor.spawn("the writer", crash(), seen.cleaned.append)
    await asyncio.wait_for(seen.reported.wait(), 5)
    [fault] = seen.faults
    assert str(fault) == "the writer failed: RuntimeError: a bug"
    assert [str(e) for e in seen.cleaned] == ["a bug"]
    assert supervisor.fault is fault


@pytest.mark.parametrize(
    ("ending", "says"), [("returns", "it returned"), ("is cancelled", "it was cancelled")]
)
async def test_a_task_that_ends_quietly_before_stop_is_a_fault_too(ending: str, says: str) -> None:
    seen = Recorded()
    supervisor = Supervisor(seen.fault)
    if ending == "returns":
        supervisor.spawn("the loop", finish())
    else:
        supervisor.spawn("the loop", asyncio.sleep(3600)).cancel()
    await asyncio.wait_for(seen.reported.wait(), 5)
    [fault] = seen.faults
    assert isinstance(fault.error, TaskDied)
    assert says in str(fault)


async def test_only_the_first_fault_is_reported_though_every_cleanup_runs() -> None:
    seen = Recorded()
    supervisor = Supervisor(seen.fault)
    tasks = [supervisor.spawn(f"task {n}", crash(), seen.cleaned.append) for n in range(3)]
    await asyncio.gather(*tasks, return_exceptions=True)
    assert len(seen.faults) == 1
    assert len(seen.cleaned) == 3


async def test_tasks_that_end_after_stop_are_not_faults() -> None:
    seen = Recorded()
    supervisor = Supervisor(seen.fault)
    running = supervisor.spawn("the loop", asyncio.sleep(3600))
    done = supervisor.spawn("the other", asyncio.sleep(3600))
    supervisor.stop()
    running.cancel()
    done.cancel()
    await asyncio.gather(running, done, return_exceptions=True)
    assert seen.faults == []
