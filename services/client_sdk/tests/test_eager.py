"""``fastworker.testing.eager()``: what code under test sees when its tasks run inline."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import fastworker
from fastworker import (
    Client,
    InvalidArguments,
    RequestRejected,
    SyncClient,
    TaskFailed,
    TaskRegistry,
    TaskStatus,
    UnknownTask,
    current_task,
    task,
)
from fastworker.testing import eager

registry = TaskRegistry()
calls: list[Any] = []


@task(registry=registry)
def add(x: int, y: int) -> int:
    return x + y


@task(registry=registry)
def echo(value: Any) -> Any:
    return value


@task(registry=registry, max_retries=3)
def flaky(succeed_on: int) -> int:
    context = current_task()
    assert context is not None
    calls.append(context.attempt)
    if context.attempt < succeed_on:
        raise ConnectionError(f"attempt {context.attempt}")
    return context.attempt


@task(registry=registry, max_retries=3, retry_on=(ConnectionError,))
def picky() -> None:
    raise KeyError("not retried")


@task(registry=registry)
def boom() -> None:
    raise ValueError("boom")


@task(registry=registry, time_limit=0.05)
async def sleeper(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "woke"


@task(registry=registry, time_limit=0.01)
def slow_sync() -> str:
    time.sleep(0.05)
    return "done"


@task(registry=registry)
def unportable() -> object:
    return {1, 2}


@task(registry=registry)
def whoami() -> dict[str, Any]:
    context = current_task()
    assert context is not None
    return {"id": context.id, "name": context.name, "attempt": context.attempt}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    calls.clear()


def test_delay_on_a_task_runs_it_inline_and_records_the_submission() -> None:
    with eager(registry) as runner, SyncClient() as client:
        task_id = add.delay(2, 3)
        assert client.wait(task_id) == 5
    [submitted] = runner.submitted(add)
    assert (submitted.task_id, submitted.args, submitted.succeeded) == (task_id, [2, 3], True)
    assert submitted.result.status == TaskStatus.SUCCESS


def test_arguments_and_results_go_through_msgpack_as_in_production() -> None:
    with eager(registry), SyncClient() as client:
        assert client.wait(client.delay(echo, (1, (2, 3)))) == [1, [2, 3]]


def test_arguments_are_checked_against_the_signature_and_names_must_be_registered() -> None:
    with eager(registry) as runner, SyncClient() as client:
        with pytest.raises(InvalidArguments, match="missing a required argument: 'y'"):
            client.delay(add, 1)  # type: ignore[call-overload]
        with pytest.raises(UnknownTask, match="no task named 'nope'"):
            client.delay("nope")
    assert runner.submissions == []


def test_a_request_that_does_not_decode_is_refused_as_by_a_control_plane() -> None:
    with (
        eager(registry) as runner,
        SyncClient() as client,
        pytest.raises(RequestRejected, match="max_retries"),
    ):
        client.apply_async(add, (1, 2), max_retries=-1)
    assert runner.submissions == []


async def test_the_async_client_gets_each_refusal_of_a_batch_at_its_own_index() -> None:
    # Given a batch whose middle task is refused (the async client batches its delays)
    with eager(registry) as runner:
        async with Client() as client:
            # When three are submitted at once
            sent = await asyncio.gather(
                client.delay(add, 1, 2),
                client.delay(add, 1),  # type: ignore[call-overload]  # on purpose: refused
                client.delay(add, 3, 4),
                return_exceptions=True,
            )
    # Then only the middle one raises, as from a control plane (one id per task, in order)
    first, refused, last = sent
    assert isinstance(refused, InvalidArguments)
    assert [s.task_id for s in runner.submissions] == [first, last]


def test_failures_are_retried_without_backoff_and_current_task_counts_attempts() -> None:
    started = time.monotonic()
    with eager(registry), SyncClient() as client:
        result = client.wait_result(flaky.delay(3))
    assert result.result == 3
    assert result.attempts == 3
    assert calls == [1, 2, 3]
    assert [e.type for e in result.attempt_errors] == ["ConnectionError"] * 2
    assert time.monotonic() - started < 5  # flaky's default backoff would be seconds


def test_retry_on_is_honoured() -> None:
    with eager(registry, propagate=False), SyncClient() as client:
        result = client.get_task_result(picky.delay())
    assert result is not None
    assert result.attempts == 1
    assert result.error is not None
    assert result.error.type == "KeyError"


def test_a_task_exception_propagates_out_of_delay_by_default() -> None:
    with eager(registry) as runner, pytest.raises(ValueError, match="boom"):
        boom.delay()
    assert runner.submitted("boom")[0].result.status == TaskStatus.FAILURE


def test_without_propagate_a_failure_is_a_result() -> None:
    with eager(registry, propagate=False), SyncClient() as client:
        task_id = boom.delay()
        with pytest.raises(TaskFailed, match="ValueError: boom"):
            client.wait(task_id)


def test_an_async_task_is_stopped_at_its_time_limit() -> None:
    with eager(registry, propagate=False), SyncClient() as client:
        assert client.wait(sleeper.delay(0)) == "woke"
        result = client.get_task_result(sleeper.delay(10))
    assert result is not None
    assert result.error is not None
    assert (result.error.type, result.error.reason) == ("Timeout", "timeout")


def test_a_sync_task_past_its_time_limit_fails_with_timeout_once_it_returns() -> None:
    with eager(registry, propagate=False), SyncClient() as client:
        result = client.get_task_result(slow_sync.delay())
    assert result is not None
    assert result.error is not None
    assert result.error.reason == "timeout"


def test_a_result_that_is_not_portable_fails_the_task() -> None:
    with eager(registry, propagate=False), SyncClient() as client:
        result = client.get_task_result(unportable.delay())
    assert result is not None
    assert result.error is not None
    assert result.error.reason == "unserializable_result"


def test_a_task_id_is_accepted_once() -> None:
    with eager(registry) as runner, SyncClient() as client:
        first = client.apply_async(add, (1, 1), task_id="same")
        second = client.apply_async(add, (1, 1), task_id="same")
    assert first == second == "same"
    assert len(runner.submissions) == 1


def test_an_idempotency_key_names_one_task() -> None:
    with eager(registry) as runner, SyncClient() as client:
        first = client.apply_async(add, (1, 1), idempotency_key="order-7")
        second = client.apply_async(add, (1, 1), idempotency_key="order-7")
    assert first == second
    assert len(runner.submissions) == 1


def test_current_task_inside_an_eager_task() -> None:
    with eager(registry), SyncClient() as client:
        task_id = client.delay(whoami)
        expected = {"id": task_id, "name": f"{__name__}.whoami", "attempt": 1}
        assert client.wait(task_id) == expected


async def test_the_async_client_runs_async_and_sync_tasks_inline() -> None:
    with eager(registry):
        async with Client() as client:
            assert await client.wait(await client.delay(sleeper, 0)) == "woke"
            assert await client.wait(await client.delay(add, 1, 2)) == 3


async def test_a_blocking_delay_from_async_code_runs_an_async_task_on_another_thread() -> None:
    with eager(registry):
        assert fastworker.default_client().wait(sleeper.delay(0)) == "woke"


def test_clients_outside_eager_are_not_affected() -> None:
    with eager(registry):
        pass
    client = SyncClient(address="tcp://127.0.0.1:1", connect_timeout=0.2, timeout=0.5)
    with client, pytest.raises(fastworker.ControlPlaneUnavailable):
        client.delay(add, 1, 2)


def test_a_fastapi_app_runs_its_tasks_inline_under_eager() -> None:
    from fastapi import Depends, FastAPI
    from fastapi.testclient import TestClient

    from fastworker.integration.fastapi import FastWorker

    app = FastAPI()
    fw = FastWorker(app)

    @app.post("/sum")
    async def total(x: int, y: int, worker: FastWorker = Depends(fw)) -> dict[str, Any]:  # noqa: B008
        task_id = await worker.delay(add, x, y)
        return {"sum": (await worker.result(task_id)).result}

    with eager(registry) as runner, TestClient(app) as http:
        assert http.post("/sum", params={"x": 2, "y": 5}).json() == {"sum": 7}
    assert [s.args for s in runner.submitted(add)] == [[2, 5]]


def test_the_default_client_follows_configure_and_the_installed_backend() -> None:
    fastworker.configure(timeout=5.0)
    try:
        with eager(registry):
            client = fastworker.default_client()
            assert client is fastworker.default_client()
            assert client._settings.timeout == 5.0
        with eager(registry):
            assert fastworker.default_client() is not client  # a new backend, a new client
    finally:
        fastworker.configure()
