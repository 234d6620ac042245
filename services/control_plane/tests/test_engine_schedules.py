"""Run-time schedules through the engine and the results port's handler: added and
removed on request, noted as operators' actions, the first tick armed at once, refusals
raised for the error reply. A fake clock; the timer is the event loop's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest
import structlog

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.dashboard import views
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.servers.results import SERVES, ResultsHandler
from fastworker_protocol import (
    AddSchedule,
    ErrorCode,
    ListSchedules,
    Param,
    RemoveSchedule,
    ScheduleAdded,
    ScheduleList,
    ScheduleRemoved,
    ScheduleSpec,
    TaskSignature,
)

NOW = 1000.0
REPORT = TaskSignature(name="report", params=[Param(name="customer", kind="POSITIONAL_OR_KEYWORD")])
TICK = TaskSignature(name="tick", repeat_interval=60.0)
SPEC = ScheduleSpec(name="acme", task="report", args=["acme"], interval=0.05)


class FakeClock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def engine(clock: FakeClock) -> AsyncIterator[Engine]:
    engine = Engine(TaskBoard(), heartbeat_timeout=10.0, clock=clock)
    engine.board.register("w", "w", 4, [REPORT, TICK], NOW)
    yield engine
    engine.close()
    for _ in range(3):
        await asyncio.sleep(0)


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_an_added_schedule_ticks_on_its_own_timer(engine: Engine, clock: FakeClock) -> None:
    added = engine.operations.add_schedule(SPEC, source="client")
    assert added.created
    assert added.schedule.next_run == NOW + 0.05
    clock.now = NOW + 0.05  # the timer armed for it fires in 0.05 s of real time

    await until(lambda: len(engine.board) == 1)

    [run] = engine.board.list_tasks(None, 10, clock.now)
    assert (run.task_id, run.name) == (f"acme@{NOW + 0.05:.3f}", "report")


async def test_adding_and_removing_are_operators_actions(engine: Engine) -> None:
    engine.operations.add_schedule(SPEC, source="http")
    removed = engine.operations.remove_schedule("acme", source="client")
    assert removed == ScheduleRemoved(name="acme", removed=True)
    assert [(a.kind, a.target, a.source) for a in engine.actions.since(0)] == [
        ("schedule.add", "acme", "http"),
        ("schedule.remove", "acme", "client"),
    ]
    assert engine.actions.since(0)[0].detail == {"task": "report", "spec": "every 0.05 s"}


async def test_the_results_port_serves_adding_listing_and_removing(engine: Engine) -> None:
    handler = ResultsHandler(engine, max_wait=5)
    assert {AddSchedule, RemoveSchedule} <= set(SERVES)

    added = await handler(AddSchedule(schedule=SPEC), -1)
    again = await handler(AddSchedule(schedule=SPEC), -1)
    listed = await handler(ListSchedules(), -1)
    removed = await handler(RemoveSchedule(name="acme"), -1)
    gone = await handler(RemoveSchedule(name="acme"), -1)

    assert isinstance(added, ScheduleAdded)
    assert isinstance(again, ScheduleAdded)
    assert (added.created, again.created) == (True, False)
    assert isinstance(listed, ScheduleList)
    assert [(s.name, s.source, s.task) for s in listed.schedules] == [
        ("acme", "runtime", "report"),
        ("tick", "declared", "tick"),
    ]
    assert removed == ScheduleRemoved(name="acme", removed=True)
    assert gone == ScheduleRemoved(name="acme", removed=False)


async def test_a_refused_schedule_raises_for_the_error_reply_and_is_not_an_action(
    engine: Engine,
) -> None:
    handler = ResultsHandler(engine, max_wait=5)
    with pytest.raises(Rejected) as unknown:
        await handler(AddSchedule(schedule=ScheduleSpec(name="x", task="nope", interval=1)), -1)
    with pytest.raises(Rejected) as declared:
        await handler(RemoveSchedule(name="tick"), -1)
    assert (unknown.value.code, declared.value.code) == (
        ErrorCode.UNKNOWN_TASK,
        ErrorCode.INVALID_MESSAGE,
    )
    assert engine.actions.since(0) == []


async def test_the_dashboard_lists_a_run_time_schedule_with_what_it_runs(engine: Engine) -> None:
    engine.operations.add_schedule(SPEC, source="http")

    document = views.schedules(engine, NOW)

    assert [s["name"] for s in document] == ["acme", "tick"]
    assert {k: document[0][k] for k in ("source", "task", "args", "kwargs", "priority")} == {
        "source": "runtime",
        "task": "report",
        "args": ["acme"],
        "kwargs": {},
        "priority": "normal",
    }


async def test_a_schedule_a_declaration_takes_the_name_of_is_dropped_with_a_warning(
    engine: Engine,
) -> None:
    engine.operations.add_schedule(report_spec("nightly"), source="client")
    nightly = TaskSignature(name="nightly", repeat_interval=5.0)

    with structlog.testing.capture_logs() as logs:
        engine.register("w2", "w2", 1, [nightly], -1, local=False)

    assert "nightly" not in engine.board.schedules.defined
    [warning] = [e for e in logs if e["log_level"] == "warning"]
    assert warning["schedules"] == ["nightly"]
    assert "run-time schedules dropped" in warning["event"]


def report_spec(name: str) -> ScheduleSpec:
    return ScheduleSpec(name=name, task="report", args=["acme"], interval=60.0)
