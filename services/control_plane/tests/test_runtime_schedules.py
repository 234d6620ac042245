"""Schedules made at run time: checked against the registered tasks, ticking once per tick
with their arguments and priority, replaced and removed by name; declared periodic tasks
run at the priority they declare. Pure: a board and explicit times."""

from __future__ import annotations

from typing import Any

import pytest

from fastworker_control_plane.core import runtime_schedules
from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import (
    ErrorCode,
    Outcome,
    Param,
    Priority,
    ScheduleSpec,
    TaskSignature,
    TaskState,
)

NOW = 1_000_000.0
REPORT = TaskSignature(
    name="report",
    params=[Param(name=p, kind="POSITIONAL_OR_KEYWORD") for p in ("customer", "fmt")],
    queue="reports",
)
TICK = TaskSignature(name="tick", repeat_interval=10.0)


def board_with(*signatures: TaskSignature) -> TaskBoard:
    """A board where ``report`` (and ``signatures``) are registered."""
    board = TaskBoard()
    board.register("w", "w", 4, [REPORT, *signatures], NOW)
    return board


def weekly(**fields: Any) -> ScheduleSpec:
    defaults: dict[str, Any] = {
        "name": "acme-weekly",
        "task": "report",
        "args": ["acme"],
        "kwargs": {"fmt": "pdf"},
        "interval": 60.0,
    }
    return ScheduleSpec(**{**defaults, **fields})


def refused(board: TaskBoard, spec: ScheduleSpec) -> Rejected:
    with pytest.raises(Rejected) as caught:
        runtime_schedules.add(board, spec, NOW)
    return caught.value


# --- making one -------------------------------------------------------------------------


def test_an_added_schedule_is_listed_with_its_task_and_arguments() -> None:
    board = board_with(TICK)
    info, created = runtime_schedules.add(board, weekly(priority=Priority.HIGH), NOW)
    assert created
    assert (info.name, info.source, info.task, info.spec) == (
        "acme-weekly",
        "runtime",
        "report",
        "every 60 s",
    )
    assert (info.args, info.kwargs, info.priority, info.next_run) == (
        ["acme"],
        {"fmt": "pdf"},
        Priority.HIGH,
        NOW + 60,
    )
    assert [i.name for i in board.schedules.infos()] == ["acme-weekly", "tick"]


def test_declared_schedules_are_listed_as_declared_running_their_own_task() -> None:
    [info] = board_with(TICK).schedules.infos()
    assert (info.source, info.task, info.args) == ("declared", "tick", [])


def test_a_cron_schedule_follows_its_time_zone() -> None:
    board = board_with()
    spec = weekly(interval=None, cron="0 9 * * 1", tz="Europe/Paris")
    info, _ = runtime_schedules.add(board, spec, 1_767_225_600.0)  # Thu 1 Jan 2026 00:00 UTC
    assert info.spec == "cron 0 9 * * 1"
    assert info.next_run == 1_767_600_000.0  # Mon 5 Jan 2026, 09:00 in Paris (08:00 UTC)


@pytest.mark.parametrize(
    ("fields", "code", "words"),
    [
        ({"task": "nope"}, ErrorCode.UNKNOWN_TASK, "no subworker has registered a task named"),
        ({"args": []}, ErrorCode.INVALID_ARGUMENTS, "missing a required argument"),
        ({"kwargs": {"fmt": 1, "x": 1}}, ErrorCode.INVALID_ARGUMENTS, "unexpected keyword"),
        ({"args": ["x" * 70_000]}, ErrorCode.INVALID_ARGUMENTS, "more than the 65536"),
        ({"interval": None}, ErrorCode.INVALID_MESSAGE, "exactly one of interval and cron"),
        ({"cron": "* * * * *"}, ErrorCode.INVALID_MESSAGE, "exactly one of interval and cron"),
        ({"interval": 0.001}, ErrorCode.INVALID_MESSAGE, "interval must be between 0.01"),
        ({"interval": 400 * 86400.0}, ErrorCode.INVALID_MESSAGE, "interval must be between"),
        ({"interval": None, "cron": "61 * * * *"}, ErrorCode.INVALID_MESSAGE, "bad cron"),
        ({"interval": None, "cron": "* * * *"}, ErrorCode.INVALID_MESSAGE, "has 5 fields"),
        ({"tz": "Mars/Olympus"}, ErrorCode.INVALID_MESSAGE, "unknown time zone"),
        ({"name": "tick"}, ErrorCode.INVALID_MESSAGE, "the schedule task 'tick' declares"),
    ],
    ids=[
        "unknown-task",
        "missing-argument",
        "unexpected-keyword",
        "oversize-arguments",
        "neither-interval-nor-cron",
        "both-interval-and-cron",
        "interval-too-short",
        "interval-too-long",
        "bad-cron",
        "four-field-cron",
        "unknown-zone",
        "declared-name",
    ],
)
def test_a_schedule_that_cannot_be_is_refused_saying_why(
    fields: dict[str, Any], code: ErrorCode, words: str
) -> None:
    board = board_with(TICK)
    rejected = refused(board, weekly(**fields))
    assert rejected.code == code
    assert words in rejected.message
    assert [i.name for i in board.schedules.infos()] == ["tick"]  # nothing was made


def test_arguments_nested_too_deep_are_refused() -> None:
    deep: list[Any] = []
    for _ in range(200):
        deep = [deep]
    rejected = refused(board_with(), weekly(args=[deep]))
    assert rejected.code == ErrorCode.INVALID_ARGUMENTS
    assert "nest more than" in rejected.message


def test_the_number_of_run_time_schedules_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime_schedules, "MAX_RUNTIME_SCHEDULES", 2)
    board = board_with()
    for name in ("a", "b"):
        runtime_schedules.add(board, weekly(name=name), NOW)
    assert "already 2 run-time schedules" in refused(board, weekly(name="c")).message
    _, created = runtime_schedules.add(board, weekly(name="b", args=["other"]), NOW)
    assert not created  # replacing one is not one more


# --- ticks ------------------------------------------------------------------------------


def test_each_tick_queues_one_run_with_the_arguments_priority_and_queue() -> None:
    board = board_with()
    runtime_schedules.add(board, weekly(priority=Priority.HIGH), NOW)
    assert board.release_due(NOW + 59).queued == 0
    assert board.release_due(NOW + 60).queued == 1
    [run] = board.dispatch(["w"])[0]["w"]
    assert (run.id, run.name, run.args, run.kwargs) == (
        f"acme-weekly@{NOW + 60:.3f}",
        "report",
        ["acme"],
        {"fmt": "pdf"},
    )
    record = board.record(run.id, NOW + 60)
    assert record is not None
    assert (record.priority, record.queue) == (Priority.HIGH, "reports")


def test_a_tick_while_the_last_run_is_live_is_skipped_not_stacked() -> None:
    board = board_with()
    runtime_schedules.add(board, weekly(queue="urgent"), NOW)
    assert board.release_due(NOW + 60).queued == 1
    assert board.release_due(NOW + 120).queued == 0  # the first run is still queued
    [info] = [i for i in board.schedules.infos() if i.name == "acme-weekly"]
    assert (info.times_run, info.skipped, info.running) == (1, 1, True)
    [run] = [r for r in board.list_tasks(None, 10, NOW) if r.name == "report"]
    assert board.record(run.task_id, NOW) is not None


def test_a_declared_periodic_task_runs_at_the_priority_it_declares() -> None:
    board = board_with(TaskSignature(name="tick", repeat_interval=10.0, priority=Priority.HIGH))
    assert board.release_due(NOW + 10).queued == 1
    [run] = board.list_tasks(None, 10, NOW + 10)
    assert (run.name, run.priority) == ("tick", Priority.HIGH)


# --- replacing and removing ---------------------------------------------------------------


def test_adding_the_same_schedule_again_keeps_its_progress() -> None:
    board = board_with()
    runtime_schedules.add(board, weekly(), NOW)
    board.release_due(NOW + 60)
    info, created = runtime_schedules.add(board, weekly(), NOW + 70)
    assert not created
    assert (info.times_run, info.next_run, info.running) == (1, NOW + 120, True)


def test_a_changed_definition_replaces_the_schedule_and_its_old_tick_never_fires() -> None:
    board = board_with()
    runtime_schedules.add(board, weekly(), NOW)  # due at NOW + 60
    info, created = runtime_schedules.add(board, weekly(interval=100.0, args=["bob"]), NOW + 10)
    assert not created
    assert (info.times_run, info.next_run, info.args) == (0, NOW + 110, ["bob"])
    assert board.release_due(NOW + 60).queued == 0  # the replaced schedule's tick
    assert board.release_due(NOW + 110).queued == 1
    [run] = [r for r in board.list_tasks(None, 10, NOW) if r.name == "report"]
    assert run.task_id == f"acme-weekly@{NOW + 110:.3f}"


def test_a_removed_schedule_stops_ticking() -> None:
    board = board_with()
    runtime_schedules.add(board, weekly(), NOW)
    assert runtime_schedules.remove(board, "acme-weekly")
    assert board.release_due(NOW + 600).queued == 0
    assert board.schedules.infos() == []


def test_removing_an_unknown_name_removes_nothing() -> None:
    assert not runtime_schedules.remove(board_with(), "never-made")


def test_a_declared_schedule_cannot_be_removed_at_run_time() -> None:
    board = board_with(TICK)
    with pytest.raises(Rejected, match="cannot be removed here") as caught:
        runtime_schedules.remove(board, "tick")
    assert caught.value.code == ErrorCode.INVALID_MESSAGE
    assert [i.name for i in board.schedules.infos()] == ["tick"]


def test_a_later_declaration_takes_its_name_back_from_a_run_time_schedule() -> None:
    board = board_with()
    runtime_schedules.add(board, weekly(name="nightly"), NOW)
    nightly = TaskSignature(name="nightly", repeat_interval=5.0)
    board.register("w2", "w2", 1, [nightly], NOW + 1)
    [info] = [i for i in board.schedules.infos() if i.name == "nightly"]
    assert (info.source, info.task, info.next_run) == ("declared", "nightly", NOW + 6)
    assert "nightly" not in board.schedules.defined
    assert board.release_due(NOW + 60).queued == 1  # the declared one's tick only
    [run] = [r for r in board.list_tasks(None, 10, NOW + 60) if r.name != "report"]
    assert run.name == "nightly"


def test_a_finished_run_lets_the_next_tick_run() -> None:
    board = board_with()
    runtime_schedules.add(board, weekly(), NOW)
    board.release_due(NOW + 60)
    [run] = board.dispatch(["w"])[0]["w"]
    board.report("w", [], [Outcome(task_id=run.id, ok=True)], NOW + 61)
    assert board.release_due(NOW + 120).queued == 1
    result = board.get(run.id, NOW + 120)
    assert result is not None
    assert result.status == TaskState.SUCCESS
