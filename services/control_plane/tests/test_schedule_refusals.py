"""Schedules that cannot run, as the control plane meets them: from a subworker's
registration (one of another version, or a registry filled by hand, which ``@task`` never
checked) and from this process's own tasks. Every one is named at once, one per line, and
refused with a clear error: never a crash, never half of them started."""

from __future__ import annotations

import pytest

from fastworker import Task, TaskRegistry
from fastworker.testing import Cluster
from fastworker_control_plane.assembly import BadTaskSchedules
from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.periodic import BadSchedule, Periodic
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.runtime_schedules import periodic_of
from fastworker_protocol import ErrorCode, Param, ScheduleSpec, TaskSignature

NOW = 1_000_000.0
NEEDS_X = [Param(name="x", kind="POSITIONAL_OR_KEYWORD")]


def test_every_bad_schedule_of_a_registration_is_named_and_none_starts() -> None:
    # Given a registration with a good periodic task and three bad ones
    signatures = [
        TaskSignature(name="good", repeat_interval=10),
        TaskSignature(name="tick", cron="61 * * * *"),
        TaskSignature(name="tock", repeat_interval=10, cron_tz="Mars/Olympus"),
        TaskSignature(name="needs", repeat_interval=10, params=NEEDS_X),
    ]
    board = TaskBoard()
    # When it arrives, then it is refused with one line per bad schedule
    with pytest.raises(Rejected) as refused:
        board.register("w", "w", 4, signatures, NOW)
    assert refused.value.code == ErrorCode.INVALID_MESSAGE
    lines = refused.value.message.splitlines()
    assert [line.split(":", 1)[0] for line in lines] == ["tick", "tock", "needs"]
    assert "bad cron expression '61 * * * *'" in lines[0]
    assert "unknown time zone 'Mars/Olympus'" in lines[1]
    assert "called without arguments" in lines[2]
    # And not even the good one was started
    assert board.schedules.infos() == []


def test_a_time_zone_name_too_long_for_a_path_is_a_bad_schedule_not_a_crash() -> None:
    signature = TaskSignature(name="p", repeat_interval=10, cron_tz="a" * 300)
    with pytest.raises(BadSchedule, match="unknown time zone"):
        Periodic.of(signature, NOW)


def test_a_run_time_schedule_in_such_a_time_zone_is_a_bad_schedule_too() -> None:
    spec = ScheduleSpec(name="s", task="report", interval=60, tz="Europe/" + "x" * 300)
    with pytest.raises(BadSchedule, match="unknown time zone"):
        periodic_of(spec, NOW)


def test_a_task_named_twice_in_one_registration_starts_one_schedule() -> None:
    board = TaskBoard()
    twice = [TaskSignature(name="p", repeat_interval=10)] * 2
    board.register("w", "w", 4, twice, NOW)
    assert [info.name for info in board.schedules.infos()] == ["p"]


def test_a_test_cluster_whose_registry_holds_bad_schedules_says_which_at_start() -> None:
    # Given a registry filled by hand, past @task's checks
    registry = TaskRegistry()

    def tick() -> None: ...

    def needs(x: int) -> int:
        return x

    registry.add(Task(fn=tick, name="tick", cron="61 * * * *"))
    registry.add(Task(fn=needs, name="needs", repeat_interval=60))
    # When a test cluster starts with it, then it refuses to, naming both problems
    with pytest.raises(BadTaskSchedules) as refused:
        Cluster(registry).start()
    assert [line.split(":", 1)[0] for line in refused.value.problems] == ["tick", "needs"]
    message = str(refused.value).splitlines()
    assert message[0] == "the tasks of this process declare schedules that cannot run:"
    assert message[1].startswith("  tick: bad cron expression")
