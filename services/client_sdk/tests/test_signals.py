"""``fastworker.signals``: connecting handlers, and what they get under ``eager()``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from fastworker import Client, SyncClient, TaskRegistry, TaskStatus, current_task, signals, task
from fastworker.signal_hooks import task_hooks
from fastworker.testing import eager
from fastworker_protocol import Assignment

registry = TaskRegistry()


@task(registry=registry)
def add(x: int, y: int) -> int:
    return x + y


@task(registry=registry, max_retries=1)
def broken(reason: str) -> None:
    raise ValueError(reason)


@task(registry=registry)
async def async_add(x: int, y: int) -> int:
    return x + y


@pytest.fixture(autouse=True)
def no_handlers_left() -> Iterator[None]:
    yield
    for signal in signals.SIGNALS:
        for handler in signal.handlers:
            signal.disconnect(handler)


@pytest.fixture
def seen() -> list[tuple[str, Any]]:
    """Every event, tagged by its signal, from sync handlers on all three task signals."""
    events: list[tuple[str, Any]] = []
    signals.task_prerun.connect(lambda run: events.append(("prerun", run)))
    signals.task_failure.connect(lambda failure: events.append(("failure", failure)))
    signals.task_postrun.connect(lambda end: events.append(("postrun", end)))
    return events


def test_with_no_handler_connected_a_run_gets_no_hooks_at_all() -> None:
    assert not signals.armed
    assert task_hooks(Assignment(id="t", name="add"), "w") is None


def test_connecting_arms_the_task_signals_and_disconnecting_the_last_disarms_them() -> None:
    def handler(run: signals.TaskRun) -> None:
        return None

    assert signals.task_prerun(handler) is handler  # a decorator returns the function
    signals.task_prerun.connect(handler)  # twice: still one registration
    assert signals.task_prerun.handlers == (handler,)
    assert signals.armed
    assert signals.task_prerun.disconnect(handler)
    assert not signals.task_prerun.disconnect(handler)
    assert not signals.armed


def test_worker_signals_alone_do_not_arm_the_task_path() -> None:
    signals.worker_process_init.connect(lambda process: None)
    assert not signals.armed


def test_a_handler_that_is_not_callable_is_refused_with_its_signal_named() -> None:
    with pytest.raises(TypeError, match=r"signals\.task_failure: a handler must be a function"):
        signals.task_failure.connect("sentry")  # type: ignore[arg-type]  # what is tested


def test_handler_modules_name_where_handlers_were_defined() -> None:
    @signals.task_prerun
    def here(run: signals.TaskRun) -> None:
        return None

    assert __name__ in signals.handler_modules()


def test_under_eager_a_success_fires_prerun_then_postrun_with_the_result(
    seen: list[tuple[str, Any]],
) -> None:
    with eager(registry):
        add.delay(2, 3)

    assert [kind for kind, _ in seen] == ["prerun", "postrun"]
    run = seen[0][1]
    assert (run.name, run.args, run.kwargs, run.attempt, run.worker_id) == (
        add.name,  # the full, module-qualified name
        (2, 3),
        {},
        1,
        "eager",
    )
    end = seen[1][1]
    assert (end.task, end.state, end.result, end.exception) == (run, TaskStatus.SUCCESS, 5, None)


def test_under_eager_each_failed_attempt_fires_failure_then_postrun_and_says_if_it_retries(
    seen: list[tuple[str, Any]],
) -> None:
    with eager(registry, propagate=False):
        broken.delay("no disk")

    assert [kind for kind, _ in seen] == ["prerun", "failure", "postrun"] * 2
    first, last = seen[1][1], seen[4][1]
    assert (first.task.attempt, first.will_retry, first.retryable) == (1, True, True)
    assert (last.task.attempt, last.will_retry) == (2, False)
    assert isinstance(last.exception, ValueError)
    assert last.error.type == "ValueError"
    assert "no disk" in last.error.traceback
    assert seen[5][1].state == TaskStatus.FAILURE


def test_a_raising_handler_is_logged_and_neither_fails_nor_loses_the_task() -> None:
    after: list[str] = []

    @signals.task_prerun
    def explode(run: signals.TaskRun) -> None:
        raise RuntimeError("handler bug")

    signals.task_prerun.connect(lambda run: after.append(run.name))

    with eager(registry) as e:
        add.delay(1, 1)

    assert e.submitted(add)[0].result.result == 2
    assert after == [add.name]  # the next handler still ran


def test_sync_handlers_run_in_the_tasks_thread_with_current_task_set() -> None:
    where: list[tuple[str, str | None]] = []

    @signals.task_prerun
    def note(run: signals.TaskRun) -> None:
        context = current_task()
        where.append((threading.current_thread().name, context.id if context else None))

    with eager(registry):
        task_id = add.delay(1, 2)

    assert where == [(threading.current_thread().name, task_id)]


async def test_async_handlers_are_awaited_around_async_tasks_only() -> None:
    awaited: list[str] = []

    @signals.task_prerun
    async def before(run: signals.TaskRun) -> None:
        awaited.append(f"prerun {run.name}")

    @signals.task_postrun
    async def after(end: signals.TaskFinished) -> None:
        awaited.append(f"postrun {end.task.name} {end.result}")

    with eager(registry):
        async with Client() as client:
            await client.submit_task("async_add", args=(1, 2))
            await client.submit_task("add", args=(1, 2))  # a sync task: not awaited

    assert awaited == [f"prerun {async_add.name}", f"postrun {async_add.name} 3"]


def test_async_handlers_of_an_async_task_run_on_the_blocking_path_too() -> None:
    awaited: list[str] = []

    @signals.task_postrun
    async def after(end: signals.TaskFinished) -> None:
        awaited.append(end.task.name)

    with eager(registry), SyncClient() as client:
        client.submit_task("async_add", args=(1, 2))

    assert awaited == [async_add.name]


def test_an_attempt_that_asks_for_a_retry_fires_task_retry_not_task_failure(
    seen: list[tuple[str, Any]],
) -> None:
    from fastworker import Retry

    @task(registry=registry, max_retries=1)
    def poll() -> str:
        context = current_task()
        if context is not None and context.attempt == 1:
            raise Retry("not ready yet")
        return "ready"

    signals.task_retry.connect(lambda asked: seen.append(("retry", asked)))
    with eager(registry):
        poll.delay()

    assert [kind for kind, _ in seen] == ["prerun", "retry", "postrun", "prerun", "postrun"]
    assert (seen[1][1].error.message, seen[1][1].will_retry) == ("not ready yet", True)
    assert [end.state for kind, end in seen if kind == "postrun"] == [
        TaskStatus.RETRYING,
        TaskStatus.SUCCESS,
    ]
