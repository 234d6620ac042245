"""``delay_on_commit`` and ``@db_task`` in a Django configured in this process (SQLite files,
two databases), with tasks run by ``eager()``: a submission waits for its transaction's
commit, is dropped on rollback, follows ``using``; ``@db_task`` refreshes connections only
on a worker and never inside a transaction."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import django  # type: ignore[import-untyped]
import pytest
from django.conf import settings  # type: ignore[import-untyped]
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]
from django.db import connections, transaction  # type: ignore[import-untyped]

from fastworker import Priority, TaskRegistry, task
from fastworker.integration.django import _process as process
from fastworker.integration.django import (
    apply_async_on_commit,
    db_task,
    delay_on_commit,
    eager_runner,
)
from fastworker.integration.django.discovery import autodiscover
from fastworker.testing import Eager, eager

registry = TaskRegistry()
ran: list[int] = []


@task(registry=registry)
def django_unit_record(n: int) -> int:
    ran.append(n)
    return n


@pytest.fixture(scope="module", autouse=True)
def django_setup(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Django for this process: the integration's app, two SQLite databases."""
    if not settings.configured:
        where = tmp_path_factory.mktemp("django")
        settings.configure(
            INSTALLED_APPS=["fastworker.integration.django"],
            DATABASES={
                "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": where / "a.db"},
                "other": {"ENGINE": "django.db.backends.sqlite3", "NAME": where / "b.db"},
            },
            FASTWORKER={"TIMEOUT": 5},
        )
        django.setup()


def rolled_back(submit: Callable[[], object]) -> None:
    """``submit()`` in a transaction (or savepoint) that then rolls back."""

    def fail() -> None:
        with transaction.atomic():
            submit()
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError, match="roll back"):
        fail()


@pytest.fixture
def runner() -> Iterator[Eager]:
    ran.clear()
    with eager(registry) as e:
        yield e
    connections.close_all()


def test_a_submission_inside_a_transaction_waits_for_its_commit(runner: Eager) -> None:
    with transaction.atomic():
        delay_on_commit(django_unit_record, (1,), {})
        assert runner.submissions == []

    [submission] = runner.submissions
    assert (submission.name, submission.args, submission.result.result) == (
        f"{__name__}.django_unit_record",  # module-qualified
        [1],
        1,
    )


def test_a_rolled_back_transaction_submits_nothing(runner: Eager) -> None:
    rolled_back(lambda: django_unit_record.delay_on_commit(2))

    assert runner.submissions == []
    assert ran == []


def test_outside_a_transaction_it_submits_at_once(runner: Eager) -> None:
    django_unit_record.delay_on_commit(3)

    assert [s.args for s in runner.submissions] == [[3]]


def test_a_savepoint_rolled_back_drops_only_its_own_submissions(runner: Eager) -> None:
    with transaction.atomic():
        delay_on_commit(django_unit_record, (4,))
        rolled_back(lambda: delay_on_commit(django_unit_record, (5,)))

    assert ran == [4]


def test_using_ties_the_submission_to_that_databases_transaction(runner: Eager) -> None:
    with transaction.atomic(using="other"):
        with transaction.atomic():
            delay_on_commit(django_unit_record, (6,), using="other")
        assert runner.submissions == []  # default committed; "other" has not yet

    assert ran == [6]


def test_apply_async_on_commit_passes_the_submission_options(runner: Eager) -> None:
    with transaction.atomic():
        apply_async_on_commit(
            django_unit_record, (7,), task_id="fixed-id", priority="high", queue="default"
        )

    [submission] = runner.submissions
    assert (submission.task_id, submission.priority) == ("fixed-id", Priority.HIGH)


def test_eager_runner_says_when_the_settings_did_not_ask_for_eager() -> None:
    with pytest.raises(LookupError, match="EAGER"):
        eager_runner()


def test_a_task_module_that_is_not_there_is_improperly_configured() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"names 'no_such_pkg\.tasks'"):
        autodiscover(["no_such_pkg.tasks"])


@pytest.mark.parametrize("missing", ["no_such_dependency", "django_unit"])
def test_a_task_module_that_imports_something_missing_shows_its_own_error(
    missing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a missing module whose name begins the task module's, too)
    (tmp_path / "django_unit_broken.py").write_text(f"import {missing}\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    with pytest.raises(ModuleNotFoundError, match=missing):
        autodiscover(["django_unit_broken"])


# --- @db_task ------------------------------------------------------------------------------


def query_then_report_connection() -> bool:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT 1")
    return connections["default"].connection is not None


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "_worker", True)


def test_on_a_worker_a_db_task_closes_its_connection_after_running(worker: None) -> None:
    checked = db_task(registry=TaskRegistry())(query_then_report_connection)

    assert checked() is True  # open while it ran
    assert connections["default"].connection is None  # CONN_MAX_AGE 0: closed after


def test_outside_a_worker_a_db_task_leaves_the_connection_to_its_caller() -> None:
    checked = db_task(registry=TaskRegistry())(query_then_report_connection)

    assert checked() is True
    assert connections["default"].connection is not None
    connections.close_all()


def test_inside_a_transaction_a_db_task_never_closes_the_connection(worker: None) -> None:
    checked = db_task(registry=TaskRegistry())(query_then_report_connection)

    with transaction.atomic():
        assert checked() is True
        assert connections["default"].connection is not None
        assert connections["default"].in_atomic_block


def test_a_db_task_keeps_the_functions_name_parameters_and_async_kind() -> None:
    reg = TaskRegistry()

    @db_task(registry=reg, queue="reports")
    def build(day: str, *, draft: bool = False) -> str:
        return day

    @db_task(registry=reg)
    async def fetch(url: str) -> str:
        return url

    here = (
        f"{__name__}.{test_a_db_task_keeps_the_functions_name_parameters_and_async_kind.__name__}"
    )
    assert reg.names() == [f"{here}.<locals>.build", f"{here}.<locals>.fetch"]
    assert [p.name for p in build.signature().params] == ["day", "draft"]
    assert build.queue == "reports"
    assert build.fn.__qualname__.endswith("build")
    assert fetch.is_async
