"""A periodic task's schedule is checked where ``@task`` declares it: every problem of the
task at once, one line each, naming the task, before anything starts."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from fastworker import TaskRegistry, task
from fastworker.schedule_checks import ScheduleProblems, collecting, schedule_problems
from fastworker.testing import eager

HERE = f"{__name__}.{{}}"  # how a problem names a function of this module


def declare(**schedule: Any) -> TaskRegistry:
    """Declare ``nightly()`` with ``schedule`` into a registry of its own."""
    registry = TaskRegistry()

    def nightly() -> None: ...

    task(registry=registry, **schedule)(nightly)
    return registry


def problems_of(**schedule: Any) -> list[str]:
    with pytest.raises(ScheduleProblems) as caught:
        declare(**schedule)
    return caught.value.problems


@pytest.mark.parametrize(
    "schedule",
    [
        {"repeat_interval": 0.01},
        {"repeat_interval": 366 * 24 * 3600},
        {"cron": "*/5 * * * *"},
        {"cron": "0 7 * * mon-fri", "cron_tz": "Europe/Paris"},
        {"cron": "0 0 L * *", "cron_tz": "America/New_York"},
        {"repeat_interval": 60, "cron_tz": "Asia/Tokyo"},
    ],
    ids=str,
)
def test_a_good_schedule_is_accepted(schedule: dict[str, Any]) -> None:
    assert len(declare(**schedule)) == 1


def test_a_bad_cron_expression_is_refused_naming_the_task_and_the_field() -> None:
    [problem] = problems_of(cron="61 * * * *")
    assert problem == HERE.format(
        "declare.<locals>.nightly: bad cron expression '61 * * * *': Bad minute"
    )


@pytest.mark.parametrize("cron", ["* * * *", "0 0 * * * *", ""])
def test_a_cron_expression_needs_exactly_five_fields(cron: str) -> None:
    [problem] = problems_of(cron=cron)
    assert "a cron expression has 5 fields (minute hour day-of-month month day-of-week)" in problem
    assert f"{cron!r} has {len(cron.split())}" in problem


def test_an_impossible_date_is_refused() -> None:
    [problem] = problems_of(cron="0 0 30 2 *")
    assert "bad cron expression '0 0 30 2 *'" in problem


@pytest.mark.parametrize("tz", ["Mars/Olympus", "", "../etc/passwd", "a" * 300])
def test_an_unknown_time_zone_is_refused(tz: str) -> None:
    [problem] = problems_of(cron="0 9 * * *", cron_tz=tz)
    assert f"unknown time zone {tz!r}" in problem


@pytest.mark.parametrize("interval", [0.001, 0, -1, 367 * 24 * 3600, float("nan"), float("inf")])
def test_an_interval_out_of_bounds_is_refused(interval: float) -> None:
    [problem] = problems_of(repeat_interval=interval)
    assert "repeat_interval must be between 0.01 seconds and a year" in problem


def test_interval_and_cron_together_are_refused() -> None:
    [problem] = problems_of(repeat_interval=60, cron="* * * * *")
    assert problem.endswith("give repeat_interval or cron, not both")


def test_a_periodic_task_with_a_parameter_without_default_is_refused() -> None:
    registry = TaskRegistry()
    with pytest.raises(ValueError, match="runs without arguments, but 'x', 'y' have no def"):

        @task(registry=registry, repeat_interval=60)
        def needs(x: int, y: int, z: int = 0) -> int:
            return x + y + z

    assert len(registry) == 0  # nothing half-registered


def test_defaults_star_args_and_star_kwargs_are_fine_for_a_periodic_task() -> None:
    registry = TaskRegistry()

    @task(registry=registry, cron="0 * * * *")
    def flexible(*args: Any, limit: int = 10, **kwargs: Any) -> int:
        return limit

    assert registry.get(flexible.name) is flexible


def test_every_problem_of_a_task_is_in_one_error_one_line_each() -> None:
    # Given a task whose schedule is wrong in three ways
    registry = TaskRegistry()
    with pytest.raises(ValueError, match="Bad minute") as caught:

        @task(registry=registry, cron="61 * * * *", cron_tz="Mars/Olympus")
        def report(day: str) -> str:
            return day

    # Then one ValueError says all three, a line each, each naming the task
    lines = str(caught.value).splitlines()
    assert len(lines) == 3
    where = HERE.format(
        "test_every_problem_of_a_task_is_in_one_error_one_line_each.<locals>.report: "
    )
    assert all(line.startswith(where) for line in lines)
    assert "Bad minute" in lines[0]
    assert "unknown time zone 'Mars/Olympus'" in lines[1]
    assert "'day' has no default" in lines[2]


def test_a_task_with_no_schedule_is_not_checked_for_one() -> None:
    def plain(x: int) -> int:
        return x

    assert schedule_problems(plain, None, None, "Not/AZone") == []


def test_inside_collecting_problems_are_noted_and_the_declarations_go_on() -> None:
    # Given two bad periodic tasks declared while a loader collects problems
    registry = TaskRegistry()
    with collecting() as problems:

        @task(registry=registry, cron="61 * * * *")
        def first() -> None: ...

        @task(registry=registry, repeat_interval=60)
        def second(x: int) -> None: ...

    # Then nothing was raised and both are noted, in order
    assert [p.split(": ", 1)[0].rsplit(".", 1)[-1] for p in problems] == ["first", "second"]
    # And outside it they raise again
    with pytest.raises(ScheduleProblems):
        task(registry=TaskRegistry(), cron="61 * * * *")(lambda: None)


def test_under_eager_a_bad_periodic_task_fails_where_it_is_declared() -> None:
    with eager(), pytest.raises(ValueError, match="unknown time zone 'Nowhere/City'"):
        declare(cron="0 9 * * *", cron_tz="Nowhere/City")


def test_declaring_tasks_without_a_cron_does_not_import_cronsim() -> None:
    probe = (
        "import sys\n"
        "from fastworker import task\n"
        "@task(repeat_interval=5)\n"
        "def tick() -> None: ...\n"
        "@task\n"
        "def add(x: int, y: int) -> int: return x + y\n"
        "assert 'cronsim' not in sys.modules, 'cronsim imported'\n"
        "@task(cron='0 * * * *')\n"
        "def hourly() -> None: ...\n"
        "assert 'cronsim' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
