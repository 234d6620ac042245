"""Periodic tasks: ticks on their grid, cron in a time zone, skip-if-running, once per tick."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.periodic import BadSchedule, Periodic
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import ErrorCode, Outcome, Param, TaskSignature, TaskState

NOW = 1_000_000.0


def at(text: str, tz: str = "UTC") -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz)).timestamp()


def test_interval_ticks_stay_on_their_grid_however_late_they_are_handled() -> None:
    periodic = Periodic.of(TaskSignature(name="p", repeat_interval=60), NOW)
    assert periodic is not None
    assert periodic.next_run == NOW + 60
    assert periodic.advance(NOW + 60.7) == 0  # handled 0.7 s late: next stays on the grid
    assert periodic.next_run == NOW + 120
    assert periodic.advance(NOW + 301) == 3  # down a while: 180, 240, 300 missed, not run
    assert periodic.next_run == NOW + 360


def test_cron_finds_the_next_run_across_a_month_end() -> None:
    signature = TaskSignature(name="p", cron="0 0 1 * *")
    periodic = Periodic.of(signature, at("2026-01-31T12:00:00"))
    assert periodic is not None
    assert periodic.next_run == at("2026-02-01T00:00:00")
    periodic.advance(periodic.next_run)
    assert periodic.next_run == at("2026-03-01T00:00:00")


def test_cron_follows_its_time_zone_across_a_dst_change() -> None:
    signature = TaskSignature(name="p", cron="30 2 * * *", cron_tz="Europe/Berlin")
    periodic = Periodic.of(signature, at("2026-03-28T12:00:00", "Europe/Berlin"))
    assert periodic is not None
    # 02:30 does not exist on 29 March 2026 in Berlin: the run is at 03:00 local time
    assert periodic.next_run == datetime(2026, 3, 29, 1, 0, tzinfo=UTC).timestamp()
    periodic.advance(periodic.next_run)
    assert periodic.next_run == at("2026-03-30T02:30:00", "Europe/Berlin")


@pytest.mark.parametrize(
    "signature",
    [
        TaskSignature(name="p", repeat_interval=1, cron="* * * * *"),
        TaskSignature(name="p", repeat_interval=0),
        TaskSignature(name="p", cron="not a cron"),
        TaskSignature(name="p", cron="* * * * *", cron_tz="Mars/Olympus"),
    ],
    ids=["both", "zero-interval", "bad-cron", "bad-zone"],
)
def test_unusable_schedules_are_refused(signature: TaskSignature) -> None:
    with pytest.raises(BadSchedule):
        Periodic.of(signature, NOW)


@pytest.mark.parametrize("cron", ["*/10 * * * * *", "0 0 1 1 * 2030", "* * * *", ""])
def test_a_cron_expression_without_exactly_five_fields_is_refused_saying_so(cron: str) -> None:
    with pytest.raises(BadSchedule, match="a cron expression has 5 fields"):
        Periodic.of(TaskSignature(name="p", cron=cron), NOW)


def test_a_registration_with_a_six_field_cron_is_an_invalid_message() -> None:
    with pytest.raises(Rejected) as refused:
        board_with(TaskSignature(name="p", cron="*/10 * * * * *"))
    assert refused.value.code == ErrorCode.INVALID_MESSAGE
    assert "5 fields" in refused.value.message


def board_with(signature: TaskSignature) -> TaskBoard:
    board = TaskBoard()
    board.register("w", "w", 4, [signature], NOW)
    return board


def test_each_tick_queues_one_run_and_a_tick_during_a_run_is_skipped() -> None:
    board = board_with(TaskSignature(name="p", repeat_interval=10))
    assert board.release_due(NOW + 9).queued == 0
    assert board.release_due(NOW + 10).queued == 1
    [run] = board.dispatch(["w"])[0]["w"]
    assert board.release_due(NOW + 20).queued == 0  # still running: skipped, not stacked
    board.report("w", [], [Outcome(task_id=run.id, ok=True)], NOW + 25)
    assert board.release_due(NOW + 30).queued == 1
    [info] = board.schedules.infos()
    assert (info.times_run, info.skipped, info.running, info.next_run) == (2, 1, True, NOW + 40)
    result = board.get(run.id, NOW + 30)
    assert result is not None
    assert result.status == TaskState.SUCCESS


def test_a_second_registration_does_not_restart_the_schedule() -> None:
    board = board_with(TaskSignature(name="p", repeat_interval=10))
    board.register("w2", "w2", 4, [TaskSignature(name="p", repeat_interval=10)], NOW + 5)
    assert board.release_due(NOW + 10).queued == 1
    assert board.release_due(NOW + 15).queued == 0


def test_a_periodic_task_that_needs_arguments_is_refused() -> None:
    needs_x = TaskSignature(
        name="p", repeat_interval=10, params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")]
    )
    with pytest.raises(Rejected, match="without arguments"):
        board_with(needs_x)
