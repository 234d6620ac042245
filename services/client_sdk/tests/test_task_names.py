"""Task names: module-qualified by default, so two modules' ``notify`` both register, and
a short name still resolves where it is unique (in the registry and under ``eager()``)."""

from __future__ import annotations

import importlib.machinery
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from fastworker import SyncClient, Task, TaskRegistry, UnknownTask, task
from fastworker._task import default_name
from fastworker.testing import eager
from fastworker_protocol.task_names import AmbiguousTaskName


def define(registry: TaskRegistry, module: str, source: str, **namespace: Any) -> Task[..., Any]:
    """The task ``source`` defines, as if it were written in ``module``."""
    scope: dict[str, Any] = {"__name__": module, "task": task, "registry": registry, **namespace}
    exec(textwrap.dedent(source), scope)  # test code, written right here
    [found] = [v for v in scope.values() if isinstance(v, Task)]
    return found


NOTIFY = """
@task(registry=registry)
def notify(user: str) -> str:
    return __name__ + ":" + user
"""


def two_notifies() -> tuple[TaskRegistry, Task[..., Any], Task[..., Any]]:
    registry = TaskRegistry()
    billing = define(registry, "billing.tasks", NOTIFY)
    shop = define(registry, "shop.tasks", NOTIFY)
    return registry, billing, shop


def test_a_task_is_named_after_its_module_and_qualified_name_by_default() -> None:
    registry = TaskRegistry()

    added = define(registry, "app.tasks", "@task(registry=registry)\ndef add(x, y): return x + y")

    assert added.name == "app.tasks.add"
    assert registry.names() == ["app.tasks.add"]


def test_two_modules_tasks_of_the_same_function_name_both_register() -> None:
    registry, billing, shop = two_notifies()

    assert registry.names() == ["billing.tasks.notify", "shop.tasks.notify"]
    assert registry.get("billing.tasks.notify") is billing
    assert registry.get("shop.tasks.notify") is shop


def test_an_explicit_name_is_kept_as_given() -> None:
    registry = TaskRegistry()

    named = define(registry, "billing.tasks", '@task(name="notify", registry=registry)\ndef n(): 0')

    assert named.name == "notify"


def test_the_same_name_given_twice_still_collides() -> None:
    registry = TaskRegistry()
    define(registry, "billing.tasks", '@task(name="notify", registry=registry)\ndef n(): 0')

    with pytest.raises(ValueError, match="task name 'notify' is already registered by"):
        define(registry, "shop.tasks", '@task(name="notify", registry=registry)\ndef n(): 0')


def test_the_registry_resolves_a_unique_short_name_and_refuses_an_ambiguous_one() -> None:
    registry, billing, _ = two_notifies()
    define(registry, "billing.reports", "@task(registry=registry)\ndef monthly(): 0")

    assert registry.resolve("monthly") is registry.get("billing.reports.monthly")
    assert registry.resolve("billing.tasks.notify") is billing
    assert registry.resolve("nope") is None
    assert registry.get("monthly") is None  # what a subworker is handed is the full name
    with pytest.raises(AmbiguousTaskName, match=r"billing\.tasks\.notify, shop\.tasks\.notify"):
        registry.resolve("notify")


def test_a_script_run_as_main_names_its_tasks_after_its_file() -> None:
    registry = TaskRegistry()

    added = define(
        registry,
        "__main__",
        "@task(registry=registry)\ndef add(): 0",
        __file__="/srv/app/jobs.py",
        __spec__=None,
    )

    assert added.name == "jobs.add"  # what ``--task-modules jobs`` registers


def test_a_module_run_with_dash_m_names_its_tasks_after_the_module() -> None:
    registry = TaskRegistry()
    spec = importlib.machinery.ModuleSpec("app.jobs", None)

    added = define(registry, "__main__", "@task(registry=registry)\ndef add(): 0", __spec__=spec)

    assert added.name == "app.jobs.add"


def test_a_script_and_the_module_it_is_agree_on_the_names(tmp_path: Path) -> None:
    # Given a script that defines a task and prints its name
    (tmp_path / "jobs.py").write_text(
        "from fastworker import TaskRegistry, task\n"
        "@task(registry=TaskRegistry())\n"
        "def add(x, y): return x + y\n"
        "print(add.name)\n"
    )
    python = sys.executable
    run = [[python, "-c", "import jobs"], [python, "jobs.py"], [python, "-m", "jobs"]]

    # When it is imported, run as a file and run with -m
    names = [
        subprocess.run(
            command, cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60
        ).stdout.strip()
        for command in run
    ]

    # Then every way names it the same
    assert names == ["jobs.add", "jobs.add", "jobs.add"]


def test_eager_runs_the_task_a_unique_short_name_stands_for_under_its_full_name() -> None:
    registry, billing, shop = two_notifies()
    define(registry, "billing.reports", "@task(registry=registry)\ndef monthly(): return 1")

    with eager(registry) as runner, SyncClient() as client:
        assert client.wait(client.delay(shop, "ann")) == "shop.tasks:ann"
        assert client.wait(client.delay("billing.tasks.notify", "bob")) == "billing.tasks:bob"
        assert client.wait(client.delay("monthly")) == 1
        assert client.wait(client.delay("reports.monthly")) == 1

    assert [s.name for s in runner.submissions] == [
        "shop.tasks.notify",
        "billing.tasks.notify",
        "billing.reports.monthly",
        "billing.reports.monthly",
    ]
    assert len(runner.submitted("monthly")) == 2
    assert [s.args for s in runner.submitted(billing)] == [["bob"]]


def test_eager_refuses_an_ambiguous_short_name_listing_the_candidates() -> None:
    registry, _, _ = two_notifies()

    with (
        eager(registry) as runner,
        SyncClient() as client,
        pytest.raises(UnknownTask) as refused,
    ):
        client.delay("notify", "ann")

    assert str(refused.value).endswith(
        "task name 'notify' is ambiguous: billing.tasks.notify, shop.tasks.notify; "
        "give the full name"
    )
    assert runner.submissions == []


def test_a_function_defined_in_a_class_is_named_by_its_qualified_name() -> None:
    def f() -> None: ...

    f.__module__, f.__qualname__ = "app.tasks", "Reports.build"

    assert default_name(f) == "app.tasks.Reports.build"
