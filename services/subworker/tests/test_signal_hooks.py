"""The subworker's executor calls ``fastworker.signals`` handlers around each attempt: sync
ones in the thread that runs the task, async ones awaited around async tasks, a raising
handler logged and ignored, and a cancelled async task's postrun saying so."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.contextvars import clear_contextvars, get_contextvars

from fastworker import TaskRegistry, TaskStatus, current_task, signals, task
from fastworker_protocol import Assignment
from fastworker_subworker.executor import Executor
from fastworker_subworker.instrument import TaskInstrument

registry = TaskRegistry()


@task(registry=registry, retry_on=(ConnectionError,))
def divide(x: int, y: int) -> float:
    return x / y


@task(registry=registry)
async def async_divide(x: int, y: int) -> float:
    await asyncio.sleep(0)
    return x / y


@task(registry=registry)
async def wait_forever() -> None:
    await asyncio.Event().wait()


@pytest.fixture(autouse=True)
def no_handlers_left() -> Iterator[None]:
    clear_contextvars()
    yield
    clear_contextvars()
    for signal in signals.SIGNALS:
        for handler in signal.handlers:
            signal.disconnect(handler)


@pytest.fixture
def executor() -> Executor:
    return Executor(registry, TaskInstrument("worker-1"))


@pytest.fixture
def seen() -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    signals.task_prerun.connect(lambda run: events.append(("prerun", run)))
    signals.task_failure.connect(lambda failure: events.append(("failure", failure)))
    signals.task_postrun.connect(lambda end: events.append(("postrun", end)))
    return events


def assign(name: str, *args: Any, attempt: int = 1) -> Assignment:
    return Assignment(id="t1", name=name, args=list(args), attempt=attempt, queue="maths")


def test_a_sync_success_fires_prerun_then_postrun_with_the_attempts_details(
    executor: Executor, seen: list[tuple[str, Any]]
) -> None:
    executor.run_sync(assign(divide.name, 6, 3, attempt=2))

    assert [kind for kind, _ in seen] == ["prerun", "postrun"]
    run = seen[0][1]
    assert (run.id, run.name, run.args, run.attempt, run.queue, run.worker_id) == (
        "t1",
        divide.name,  # module-qualified
        (6, 3),
        2,
        "maths",
        "worker-1",
    )
    assert (seen[1][1].state, seen[1][1].result, seen[1][1].task) == (TaskStatus.SUCCESS, 2, run)


def test_a_sync_failure_fires_failure_before_postrun_with_the_live_exception(
    executor: Executor, seen: list[tuple[str, Any]]
) -> None:
    outcome = executor.run_sync(assign(divide.name, 1, 0))

    assert not outcome.ok
    assert [kind for kind, _ in seen] == ["prerun", "failure", "postrun"]
    failure = seen[1][1]
    assert isinstance(failure.exception, ZeroDivisionError)
    assert failure.error == outcome.error
    assert failure.retryable is False  # retry_on names ConnectionError only
    assert failure.will_retry is None  # max_retries is the control plane's to apply
    assert seen[2][1].state == TaskStatus.FAILURE


def test_sync_handlers_run_in_the_tasks_thread_inside_its_log_and_task_context(
    executor: Executor,
) -> None:
    where: list[Any] = []

    @signals.task_prerun
    def note(run: signals.TaskRun) -> None:
        context = current_task()
        fields = get_contextvars()
        where.append((threading.current_thread().name, context and context.id, fields["task_id"]))

    thread = threading.Thread(
        target=executor.run_sync, args=(assign(divide.name, 1, 1),), name="task-thread"
    )
    thread.start()
    thread.join()

    assert where == [("task-thread", "t1", "t1")]


def test_a_raising_handler_neither_fails_the_task_nor_stops_the_next_handler(
    executor: Executor,
) -> None:
    ran: list[str] = []

    @signals.task_postrun
    def explode(end: signals.TaskFinished) -> None:
        raise RuntimeError("handler bug")

    signals.task_postrun.connect(lambda end: ran.append(end.task.name))

    outcome = executor.run_sync(assign(divide.name, 4, 2))

    assert (outcome.ok, outcome.result, ran) == (True, 2, [divide.name])


async def test_async_handlers_are_awaited_around_an_async_task_after_the_sync_ones(
    executor: Executor,
) -> None:
    order: list[str] = []

    @signals.task_prerun
    async def before_async(run: signals.TaskRun) -> None:
        await asyncio.sleep(0)
        order.append("prerun async")

    signals.task_prerun.connect(lambda run: order.append("prerun sync"))

    @signals.task_failure
    async def failed(failure: signals.TaskFailure) -> None:
        order.append(f"failure async {type(failure.exception).__name__}")

    @signals.task_postrun
    async def after_async(end: signals.TaskFinished) -> None:
        order.append(f"postrun async {end.state}")

    outcome = await executor.run_async(assign(async_divide.name, 1, 0))

    assert not outcome.ok
    assert order == [
        "prerun sync",
        "prerun async",
        "failure async ZeroDivisionError",
        "postrun async failure",
    ]


def test_a_sync_task_calls_no_async_handler(executor: Executor) -> None:
    called: list[str] = []

    @signals.task_prerun
    async def never(run: signals.TaskRun) -> None:
        called.append("async")

    signals.task_prerun.connect(lambda run: called.append("sync"))

    assert executor.run_sync(assign(divide.name, 1, 1)).ok
    assert called == ["sync"]


async def test_a_cancelled_async_task_gets_a_cancelled_postrun_and_no_failure(
    executor: Executor, seen: list[tuple[str, Any]]
) -> None:
    began = asyncio.Event()
    signals.task_prerun.connect(lambda run: began.set())
    running = asyncio.ensure_future(executor.run_async(assign(wait_forever.name)))
    await asyncio.wait_for(began.wait(), 5)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    assert [kind for kind, _ in seen] == ["prerun", "postrun"]
    assert seen[1][1].state == TaskStatus.CANCELLED
    assert get_contextvars() == {}  # the log context was still reset
