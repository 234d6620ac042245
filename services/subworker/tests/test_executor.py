"""The executor runs registered tasks within its concurrency and turns every ending into an
``Outcome``; it never imports a name it was not given."""

from __future__ import annotations

import asyncio
import importlib.abc
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from fastworker import Task, TaskRegistry, task
from fastworker_protocol import Assignment
from fastworker_subworker.executor import Executor

MakeExecutor = Callable[..., Executor]


@pytest.fixture
def registry() -> TaskRegistry:
    return TaskRegistry()


@pytest.fixture
def make_executor(registry: TaskRegistry) -> Iterator[MakeExecutor]:
    made: list[Executor] = []

    def make(concurrency: int = 2, on_start: Callable[[str], None] = lambda _: None) -> Executor:
        made.append(executor := Executor(registry, concurrency, on_start))
        return executor

    yield make
    for executor in made:
        executor.shutdown()


def run(name: str, task_id: str = "t1", *args: Any) -> Assignment:
    return Assignment(id=task_id, name=name, args=list(args))


async def test_an_async_tasks_value_comes_back_in_an_ok_outcome(
    registry: TaskRegistry, make_executor: MakeExecutor
) -> None:
    @task(registry=registry)
    async def add(x: int, y: int) -> int:
        return x + y

    outcome = await asyncio.wait_for(make_executor().execute(run("add", "t1", 2, 3)), 2)

    assert (outcome.task_id, outcome.ok, outcome.result, outcome.error) == ("t1", True, 5, None)
    assert outcome.started_at is not None
    assert outcome.finished_at is not None
    assert outcome.started_at <= outcome.finished_at


async def test_a_sync_task_runs_off_the_loop_thread_while_the_loop_stays_responsive(
    registry: TaskRegistry, make_executor: MakeExecutor
) -> None:
    loop = asyncio.get_running_loop()
    entered = asyncio.Event()
    release = threading.Event()

    def blocking() -> int:
        loop.call_soon_threadsafe(entered.set)
        release.wait(2)
        return threading.get_ident()

    registry.add(Task(fn=blocking, name="blocking"))
    running = asyncio.create_task(make_executor().execute(run("blocking")))
    try:
        # The task is blocked on its thread; the loop still runs this coroutine.
        await asyncio.wait_for(entered.wait(), 2)
        assert not running.done()
    finally:
        release.set()
    outcome = await asyncio.wait_for(running, 2)

    assert outcome.ok
    assert outcome.result != threading.get_ident()


async def test_an_exception_becomes_a_failed_outcome_with_its_type_message_and_traceback(
    registry: TaskRegistry, make_executor: MakeExecutor
) -> None:
    @task(registry=registry)
    async def explode() -> None:
        raise ValueError("bad input")

    outcome = await asyncio.wait_for(make_executor().execute(run("explode")), 2)

    assert not outcome.ok
    assert outcome.error is not None
    assert (outcome.error.type, outcome.error.message) == ("ValueError", "bad input")
    assert outcome.error.reason == "exception"
    assert "explode" in outcome.error.traceback
    assert "ValueError: bad input" in outcome.error.traceback


class _ImportSpy(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.asked: list[str] = []

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        self.asked.append(fullname)
        return None


async def test_an_unknown_name_fails_with_lookup_error_and_imports_nothing(
    make_executor: MakeExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _ImportSpy()
    monkeypatch.setattr(sys, "meta_path", [spy, *sys.meta_path])

    name = "fastworker_never_imported.tasks.run"
    outcome = await asyncio.wait_for(make_executor().execute(run(name)), 2)

    assert not outcome.ok
    assert outcome.error is not None
    assert outcome.error.type == "LookupError"
    assert name in outcome.error.message
    assert not [n for n in spy.asked if n.startswith("fastworker_never_imported")]
    assert "fastworker_never_imported" not in sys.modules


async def test_a_result_msgpack_cannot_carry_fails_as_unserializable(
    registry: TaskRegistry, make_executor: MakeExecutor
) -> None:
    @task(registry=registry)
    async def opaque() -> object:
        return object()

    outcome = await asyncio.wait_for(make_executor().execute(run("opaque")), 2)

    assert not outcome.ok
    assert outcome.result is None
    assert outcome.error is not None
    assert outcome.error.reason == "unserializable_result"


async def test_bytes_stay_bytes_and_a_datetime_becomes_its_iso_string(
    registry: TaskRegistry, make_executor: MakeExecutor
) -> None:
    when = datetime(2024, 1, 2, 3, 4, 5)

    @task(registry=registry)
    def mixed() -> dict[str, Any]:
        return {"raw": b"\x00\xff", "when": when}

    outcome = await asyncio.wait_for(make_executor().execute(run("mixed")), 2)

    assert outcome.ok
    assert outcome.result == {"raw": b"\x00\xff", "when": when.isoformat()}
    assert isinstance(outcome.result["raw"], bytes)


async def test_no_more_than_concurrency_tasks_run_at_once_and_on_start_marks_each_slot(
    registry: TaskRegistry, make_executor: MakeExecutor
) -> None:
    gate = asyncio.Event()
    entered: asyncio.Queue[int] = asyncio.Queue()
    running = peak = 0
    started: list[str] = []

    @task(registry=registry)
    async def held(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        entered.put_nowait(i)
        await gate.wait()
        running -= 1
        return i

    executor = make_executor(concurrency=2, on_start=started.append)
    runs = [asyncio.create_task(executor.execute(run("held", f"t{i}", i))) for i in range(4)]
    try:
        for _ in range(2):
            await asyncio.wait_for(entered.get(), 2)
        for _ in range(5):
            await asyncio.sleep(0)
        assert (running, entered.empty()) == (2, True)
        assert started == ["t0", "t1"]

        gate.set()
        outcomes = await asyncio.wait_for(asyncio.gather(*runs), 2)
    finally:
        for r in runs:
            r.cancel()
        await asyncio.gather(*runs, return_exceptions=True)

    assert [o.result for o in outcomes] == [0, 1, 2, 3]
    assert peak == 2
    assert started == ["t0", "t1", "t2", "t3"]


async def test_on_start_is_called_with_the_task_id_before_the_task_runs(
    registry: TaskRegistry, make_executor: MakeExecutor
) -> None:
    started: list[str] = []

    @task(registry=registry)
    def snapshot() -> list[str]:
        return list(started)

    executor = make_executor(concurrency=1, on_start=started.append)
    outcome = await asyncio.wait_for(executor.execute(run("snapshot", "t7")), 2)

    assert outcome.result == ["t7"]
    assert started == ["t7"]


async def test_cancelling_execute_raises_cancelled_error_inside_an_async_task(
    registry: TaskRegistry, make_executor: MakeExecutor
) -> None:
    entered = asyncio.Event()
    saw_cancel = False

    @task(registry=registry)
    async def forever() -> None:
        nonlocal saw_cancel
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            saw_cancel = True
            raise

    running = asyncio.create_task(make_executor().execute(run("forever")))
    await asyncio.wait_for(entered.wait(), 2)
    running.cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(running, 2)
    assert saw_cancel
