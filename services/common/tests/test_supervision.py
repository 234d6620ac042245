"""Supervised tasks: one that ends before its owner stops (raising, returning or
cancelled) is a fault, reported once with its cleanup run; after ``stop`` or ``end`` ends
are fine. A ``LOG`` task's death is only logged; a kept one is restarted until a
permanent error ends it as a fault."""

from __future__ import annotations

import asyncio

import pytest

from fastworker_common.supervision import Fault, Policy, Restart, Supervisor, TaskDied


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


async def test_a_task_ended_by_its_owner_is_not_a_fault() -> None:
    seen = Recorded()
    supervisor = Supervisor(seen.fault)
    running = supervisor.spawn("the loop", asyncio.sleep(3600))
    await supervisor.end(running)
    await supervisor.end(None)  # nothing to end: nothing happens
    await asyncio.sleep(0)
    assert running.cancelled()
    assert seen.faults == []


async def test_a_logged_task_that_dies_is_no_fault_and_the_others_go_on() -> None:
    seen = Recorded()
    supervisor = Supervisor(seen.fault)
    dying = supervisor.spawn("the watcher", crash(), policy=Policy.LOG)
    returning = supervisor.spawn("the other", finish(), policy=Policy.LOG)
    await asyncio.gather(dying, returning, return_exceptions=True)
    await asyncio.sleep(0)
    assert seen.faults == []
    assert supervisor.fault is None


class Flaky:
    """Work that fails with each of ``errors`` in turn, then waits to be ended."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.runs = 0
        self.done = asyncio.Event()

    async def __call__(self) -> None:
        self.runs += 1
        if self.errors:
            raise self.errors.pop(0)
        self.done.set()
        await asyncio.sleep(3600)


async def test_kept_work_runs_again_after_any_error_that_is_not_permanent() -> None:
    seen = Recorded()
    supervisor = Supervisor(seen.fault)
    work = Flaky(ConnectionError("expected"), KeyError("a bug"))
    kept = supervisor.keep("the campaign", work, Restart(0.001, expected=(ConnectionError,)))
    await asyncio.wait_for(work.done.wait(), 5)
    assert work.runs == 3
    await supervisor.end(kept)
    assert seen.faults == []


async def test_kept_work_that_returns_runs_again_at_once() -> None:
    supervisor = Supervisor(Recorded().fault)
    runs = 0
    again = asyncio.Event()

    async def round_() -> None:
        nonlocal runs
        runs += 1
        if runs == 3:
            again.set()
            await asyncio.sleep(3600)

    kept = supervisor.keep("the round", round_, Restart(3600.0))
    await asyncio.wait_for(again.wait(), 5)  # no 3600 s pause between rounds
    await supervisor.end(kept)


async def test_a_permanent_error_ends_kept_work_as_a_fault() -> None:
    seen = Recorded()
    supervisor = Supervisor(seen.fault, permanent=(PermissionError,))
    work = Flaky(ConnectionError("retried"), PermissionError("wrong token"))
    supervisor.keep("the campaign", work, Restart(0.001, expected=(OSError,)))
    await asyncio.wait_for(seen.reported.wait(), 5)
    [fault] = seen.faults
    assert str(fault) == "the campaign failed: PermissionError: wrong token"
    assert work.runs == 2


async def test_a_supervisor_with_no_owner_to_stop_only_keeps_its_fault() -> None:
    supervisor = Supervisor()
    await asyncio.gather(supervisor.spawn("the chore", crash()), return_exceptions=True)
    await asyncio.sleep(0)
    assert str(supervisor.fault) == "the chore failed: RuntimeError: a bug"


async def test_ending_a_task_does_not_swallow_the_callers_own_cancellation() -> None:
    supervisor = Supervisor(Recorded().fault)

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0.05)  # takes a moment to end

    running = supervisor.spawn("the loop", stubborn())
    await asyncio.sleep(0)
    ending = asyncio.create_task(supervisor.end(running))
    await asyncio.sleep(0.01)
    ending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await ending
    await asyncio.wait([running])
