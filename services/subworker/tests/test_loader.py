"""Loading ``--task-modules``: a worker that cannot load its tasks says why, one line per
problem, and every schedule problem of every module at once."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fastworker_subworker import TaskModuleError, load_task_modules

Write = Callable[[str], str]

BAD_SCHEDULES = """
from fastworker import TaskRegistry, task

registry = TaskRegistry()  # of its own: the test process's default one stays clean

@task(registry=registry, cron="61 * * * *")
def tick() -> None: ...

@task(registry=registry, repeat_interval=60, cron_tz="Mars/Olympus")
def tock() -> None: ...

@task(registry=registry, repeat_interval=60)
def needs(x: int) -> int:
    return x
"""


@pytest.fixture
def write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Write]:
    """Write a module into a directory that is the working one; returns its unique name.
    The modules imported are forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    written: list[str] = []

    def writing(source: str) -> str:
        name = f"loader_case_{uuid.uuid4().hex[:12]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        written.append(name)
        return name

    yield writing
    for name in written:
        sys.modules.pop(name, None)


def test_every_schedule_problem_of_every_module_is_reported_at_once(write: Write) -> None:
    # Given two modules, one with three bad periodic tasks, one with another
    first = write(BAD_SCHEDULES)
    second = write(
        """
        from fastworker import TaskRegistry, task

        @task(registry=TaskRegistry(), cron="* * * *")
        def hourly() -> None: ...
        """
    )
    # When a worker loads them
    with pytest.raises(TaskModuleError) as caught:
        load_task_modules([first, second])
    # Then one error lists the four problems, one line each, naming each task
    assert caught.value.problems == [
        f"{first}.tick: bad cron expression '61 * * * *': Bad minute",
        f"{first}.tock: unknown time zone 'Mars/Olympus' (cron_tz takes IANA names: "
        "'Europe/Paris')",
        f"{first}.needs: a periodic task runs without arguments, but 'x' has no default",
        f"{second}.hourly: a cron expression has 5 fields (minute hour day-of-month month "
        "day-of-week), '* * * *' has 4",
    ]
    message = str(caught.value).splitlines()
    assert message[0] == "cannot load the task modules:"
    assert message[1:] == [f"  {line}" for line in caught.value.problems]


def test_a_module_that_cannot_be_imported_is_named(write: Write) -> None:
    missing = f"no_such_module_{uuid.uuid4().hex[:8]}"
    with pytest.raises(TaskModuleError, match=f"^cannot import task module '{missing}'"):
        load_task_modules([missing])


def test_schedule_problems_found_before_a_failed_import_are_reported_with_it(
    write: Write,
) -> None:
    bad = write(BAD_SCHEDULES)
    missing = f"no_such_module_{uuid.uuid4().hex[:8]}"
    with pytest.raises(TaskModuleError) as caught:
        load_task_modules([bad, missing, bad])
    problems = caught.value.problems
    assert len(problems) == 4
    assert problems[-1].startswith(f"cannot import task module '{missing}'")


def test_another_declaration_refused_by_task_is_reported_with_its_module(write: Write) -> None:
    # Given a module whose @task is refused for a reason other than its schedule
    bad = write(
        """
        from fastworker import TaskRegistry, task

        @task(registry=TaskRegistry(), concurrency_limit=0)
        def limited() -> None: ...
        """
    )
    # Then its ValueError is the problem, with the module's name
    with pytest.raises(TaskModuleError) as caught:
        load_task_modules([bad])
    assert caught.value.problems == [f"task module '{bad}': concurrency_limit must be at least 1"]


def test_good_modules_load_and_register(write: Write) -> None:
    good = write(
        """
        from fastworker import TaskRegistry, task

        registry = TaskRegistry()

        @task(registry=registry, cron="*/5 * * * *", cron_tz="Europe/Paris")
        def every_five_minutes(limit: int = 10) -> int:
            return limit
        """
    )
    load_task_modules([good])
    assert len(sys.modules[good].registry) == 1
