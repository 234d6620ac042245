"""The process pool: where a child finds each process task, the pool's options, when a
child is recycled, and (with real child processes) a chunk run end to end and a child that
cannot import its tasks."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from fastworker import TaskRegistry, task
from fastworker_protocol import Assignment
from fastworker_subworker import child_wire
from fastworker_subworker.child_run import ChildRun, Fate
from fastworker_subworker.instrument import TaskInstrument
from fastworker_subworker.processes import (
    ChildBroken,
    ChildProcess,
    PoolOptions,
    ProcessPool,
    task_refs,
)

HERE = Path(__file__).parent


@pytest.fixture
def process_tasks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The tasks module a child imports, imported here too (without a trace after)."""
    monkeypatch.syspath_prepend(str(HERE))
    import process_tasks

    yield process_tasks
    sys.modules.pop("process_tasks", None)


# --- where a child finds the tasks ---------------------------------------------------------


def test_a_module_level_process_task_is_found_by_its_module_and_qualname(
    process_tasks: Any,
) -> None:
    refs = task_refs(process_tasks.registry)

    assert refs == [
        child_wire.TaskRef("process_tasks.pid_of", "process_tasks", "pid_of"),
        child_wire.TaskRef("process_tasks.double", "process_tasks", "double"),
    ]


def test_thread_and_async_tasks_stay_in_the_subworker() -> None:
    registry = TaskRegistry()

    @task(registry=registry)
    def on_a_thread() -> None:
        return None

    @task(registry=registry)
    async def on_the_loop() -> None:
        return None

    assert task_refs(registry) == []


def test_a_process_task_defined_inside_a_function_is_refused_with_where_it_is() -> None:
    registry = TaskRegistry()

    @task(pool="process", registry=registry)
    def nested() -> None:
        return None

    with pytest.raises(
        ValueError, match=r"process task '\S+\.<locals>\.nested' is defined inside a function"
    ) as caught:
        task_refs(registry)

    assert "<locals>.nested" in str(caught.value)
    assert str(caught.value).endswith("only import tasks defined at a module's top level")


# --- options and recycling -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"processes": 0}, "processes must be at least 1"),
        ({"processes": 1, "max_tasks_per_child": 0}, "max_tasks_per_child must be at least 1"),
        ({"processes": 1, "max_memory_per_child": 0}, "max_memory_per_child must be positive"),
    ],
)
def test_pool_options_out_of_range_are_refused(options: dict[str, int], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        PoolOptions(**options)


def test_pool_options_default_to_no_recycling() -> None:
    options = PoolOptions(processes=2)

    assert (options.max_tasks_per_child, options.max_memory_per_child) == (None, None)


def a_child(tasks_run: int = 0, rss: int = 0) -> ChildProcess:
    """A ``ChildProcess`` with no process behind it: only its counters matter here."""
    child = ChildProcess(cast(Any, SimpleNamespace(pid=1)), cast(Any, None), cast(Any, None))
    child.tasks_run, child.rss = tasks_run, rss
    return child


def test_without_limits_a_child_is_never_recycled() -> None:
    options = PoolOptions(processes=1)
    child = a_child(tasks_run=10**6, rss=1 << 40)

    assert not child.wants_recycling(options)
    assert child.tasks_left(options) is None


@pytest.mark.parametrize(
    ("tasks_run", "recycled", "left"), [(0, False, 3), (2, False, 1), (3, True, 1), (4, True, 1)]
)
def test_a_child_is_recycled_once_it_has_run_max_tasks_per_child(
    tasks_run: int, recycled: bool, left: int
) -> None:
    options = PoolOptions(processes=1, max_tasks_per_child=3)
    child = a_child(tasks_run=tasks_run)

    assert child.wants_recycling(options) == recycled
    assert child.tasks_left(options) == left  # a chunk never asks for none


@pytest.mark.parametrize(("rss", "recycled"), [(100, False), (101, True)])
def test_a_child_is_recycled_once_it_grows_past_max_memory_per_child(
    rss: int, recycled: bool
) -> None:
    options = PoolOptions(processes=1, max_memory_per_child=100)

    assert a_child(rss=rss).wants_recycling(options) == recycled


# --- real children -------------------------------------------------------------------------


def children_of_this_process() -> set[int]:
    """Our child processes, zombies included (``/proc``: Linux)."""
    mine = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended as we looked
        if int(fields[1]) == os.getpid():
            mine.add(int(stat.parent.name))
    return mine


@pytest.fixture
async def no_child_left() -> AsyncIterator[None]:
    before = children_of_this_process()
    yield
    assert children_of_this_process() <= before


def spec(*refs: child_wire.TaskRef) -> child_wire.Spec:
    return child_wire.Spec(sys_path=[str(HERE), *sys.path], tasks=list(refs), worker_id="w")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.usefixtures("no_child_left")
async def test_a_pool_child_runs_a_chunk_and_is_gone_once_the_pool_closes() -> None:
    # Given a pool of one child that imported the test's process tasks
    pool = ProcessPool(
        spec(
            child_wire.TaskRef("process_tasks.pid_of", "process_tasks", "pid_of"),
            child_wire.TaskRef("process_tasks.double", "process_tasks", "double"),
        ),
        PoolOptions(processes=1),
    )
    await asyncio.wait_for(pool.start(), 60)
    try:
        child = await asyncio.wait_for(pool.acquire(), 5)
        # When it is given a chunk
        chunk = [
            Assignment(id="t1", name="process_tasks.pid_of"),
            Assignment(id="t2", name="process_tasks.double", args=[21]),
        ]
        end = await asyncio.wait_for(ChildRun(child, chunk, TaskInstrument("w")).run(), 30)
        pool.release(child)
    finally:
        # And the pool is closed
        await asyncio.wait_for(pool.close(), 30)

    # Then the tasks ran in that child, which is ready for more, and is gone now
    assert end.fate == Fate.IDLE
    assert [(a.id, o.ok, o.result) for a, o in end.outcomes] == [
        ("t1", True, child.pid),
        ("t2", True, 42),
    ]
    assert child.pid != os.getpid()
    assert (child.tasks_run, pool.alive) == (2, 0)
    assert child.rss > 0
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.usefixtures("no_child_left")
async def test_a_pool_whose_child_cannot_import_its_tasks_does_not_start_and_says_why() -> None:
    pool = ProcessPool(
        spec(child_wire.TaskRef("ghost", "no_such_module_for_fastworker", "ghost")),
        PoolOptions(processes=2),
    )

    with pytest.raises(ChildBroken) as caught:
        await asyncio.wait_for(pool.start(), 60)

    assert str(caught.value) == (
        "a process-pool child could not start: "
        "ModuleNotFoundError: No module named 'no_such_module_for_fastworker'"
    )
    assert pool.alive == 0
