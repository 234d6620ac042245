"""The executor turns one assignment into an ``Outcome``: a value, an exception or an
unknown name all end as an outcome, and it never imports a name it was not given."""

from __future__ import annotations

import asyncio
import importlib.abc
import sys
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec
import pytest

from fastworker import TaskRegistry, task
from fastworker_protocol import MAX_NESTING, Assignment, FailureReason
from fastworker_subworker.executor import Executor

Ext = msgspec.msgpack.Ext


class Money(Decimal):
    """A subclass of a registered type is not that type."""


class Ident(UUID):
    pass


@pytest.fixture
def registry() -> TaskRegistry:
    return TaskRegistry()


@pytest.fixture
def executor(registry: TaskRegistry) -> Executor:
    return Executor(registry)


def run(name: str, task_id: str = "t1", *args: Any) -> Assignment:
    return Assignment(id=task_id, name=name, args=list(args))


async def test_an_async_tasks_value_comes_back_in_an_ok_outcome(
    registry: TaskRegistry, executor: Executor
) -> None:
    @task(registry=registry)
    async def add(x: int, y: int) -> int:
        return x + y

    outcome = await asyncio.wait_for(executor.run_async(run(add.name, "t1", 2, 3)), 5)

    assert (outcome.task_id, outcome.ok, outcome.result, outcome.error) == ("t1", True, 5, None)
    assert outcome.started_at is not None
    assert outcome.finished_at is not None
    assert outcome.started_at <= outcome.finished_at


def test_run_sync_returns_a_sync_tasks_value_with_its_times(
    registry: TaskRegistry, executor: Executor
) -> None:
    @task(registry=registry)
    def greet(name: str, punctuation: str = ".") -> str:
        return f"hello {name}{punctuation}"

    assignment = Assignment(id="t2", name=greet.name, args=["ada"], kwargs={"punctuation": "!"})
    outcome = executor.run_sync(assignment)

    assert (outcome.task_id, outcome.ok, outcome.result) == ("t2", True, "hello ada!")
    assert outcome.started_at is not None
    assert outcome.finished_at is not None
    assert outcome.started_at <= outcome.finished_at


async def test_an_async_exception_becomes_a_failed_outcome_with_type_message_and_traceback(
    registry: TaskRegistry, executor: Executor
) -> None:
    @task(registry=registry)
    async def explode() -> None:
        raise ValueError("bad input")

    outcome = await asyncio.wait_for(executor.run_async(run(explode.name)), 5)

    assert not outcome.ok
    assert outcome.result is None
    assert outcome.error is not None
    assert (outcome.error.type, outcome.error.message) == ("ValueError", "bad input")
    assert outcome.error.reason == "exception"
    assert "explode" in outcome.error.traceback
    assert "ValueError: bad input" in outcome.error.traceback


def test_a_sync_exception_becomes_a_failed_outcome_with_type_message_and_traceback(
    registry: TaskRegistry, executor: Executor
) -> None:
    @task(registry=registry)
    def divide(x: int, y: int) -> float:
        return x / y

    outcome = executor.run_sync(run(divide.name, "t3", 1, 0))

    assert (outcome.task_id, outcome.ok) == ("t3", False)
    assert outcome.error is not None
    assert outcome.error.type == "ZeroDivisionError"
    assert outcome.error.message == "division by zero"
    assert outcome.error.reason == "exception"
    assert "divide" in outcome.error.traceback


class _ImportSpy(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.asked: list[str] = []

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        self.asked.append(fullname)
        return None


async def test_an_unknown_name_fails_with_lookup_error_and_imports_nothing(
    executor: Executor, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _ImportSpy()
    monkeypatch.setattr(sys, "meta_path", [spy, *sys.meta_path])
    name = "fastworker_never_imported.tasks.run"

    assert executor.pool_of(run(name)) == "thread"
    outcomes = [
        await asyncio.wait_for(executor.run_async(run(name)), 5),
        executor.run_sync(run(name)),
    ]

    for outcome in outcomes:
        assert not outcome.ok
        assert outcome.error is not None
        assert outcome.error.type == "LookupError"
        assert outcome.error.reason == "exception"
        assert name in outcome.error.message
    assert not [n for n in spy.asked if n.startswith("fastworker_never_imported")]
    assert "fastworker_never_imported" not in sys.modules


async def test_a_result_msgpack_cannot_carry_fails_as_unserializable(
    registry: TaskRegistry, executor: Executor
) -> None:
    @task(registry=registry)
    async def opaque() -> object:
        return object()

    @task(registry=registry)
    def opaque_sync() -> object:
        return object()

    outcomes = [
        await asyncio.wait_for(executor.run_async(run(opaque.name)), 5),
        executor.run_sync(run(opaque_sync.name)),
    ]

    for outcome in outcomes:
        assert not outcome.ok
        assert outcome.result is None
        assert outcome.error is not None
        assert outcome.error.reason == "unserializable_result"
        assert outcome.error.type == "TypeError"
        assert "object" in outcome.error.message


def test_a_portable_result_is_sent_as_it_is_and_a_bytearray_as_bytes(
    registry: TaskRegistry, executor: Executor
) -> None:
    when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    buffer = bytearray(b"\x01")

    @task(registry=registry)
    def mixed() -> dict[str, Any]:
        return {"raw": b"\x00\xff", "when": when, "pair": (1, 2)}

    @task(registry=registry)
    def buffered() -> bytearray:
        return buffer

    outcome = executor.run_sync(run(mixed.name))
    raw = executor.run_sync(run(buffered.name))
    buffer.append(2)  # the task changing its buffer afterwards changes nothing sent

    assert outcome.ok
    assert outcome.result == {"raw": b"\x00\xff", "when": when, "pair": (1, 2)}
    assert (raw.result, type(raw.result)) == (b"\x01", bytes)


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({1, 2}, "result of type set cannot be sent: result has type set"),
        (Money("1.5"), "Money, which is a subclass of decimal.Decimal"),
        (Ident(int=7), "Ident, which is a subclass of uuid.UUID"),
        (datetime(2024, 1, 2), "result has type datetime.datetime, which is naive"),
        ({"at": [2**64]}, "result of type dict cannot be sent: result['at'][0] is an int outside"),
    ],
    ids=["set", "decimal-subclass", "uuid-subclass", "naive-datetime", "big-int"],
)
def test_a_result_that_would_not_come_back_as_itself_fails_naming_its_type(
    registry: TaskRegistry, executor: Executor, value: object, named: str
) -> None:
    # Given a task returning a value msgspec could coerce, but the wire rule refuses
    @task(registry=registry)
    def coerced() -> object:
        return value

    # When it runs
    outcome = executor.run_sync(run(coerced.name))
    # Then it fails, never retried, with a message naming the type (nothing was coerced)
    assert not outcome.ok
    assert outcome.result is None
    assert outcome.error is not None
    assert outcome.error.reason == FailureReason.UNSERIALIZABLE_RESULT
    assert outcome.retryable is False
    assert named in outcome.error.message


def test_registered_types_reach_the_task_as_themselves_and_leave_as_extension_values(
    registry: TaskRegistry, executor: Executor
) -> None:
    # Given a task, and arguments as a control plane assigns them (extension values)
    seen: list[Any] = []

    @task(registry=registry)
    def book(order: UUID, amount: Decimal) -> dict[str, Any]:
        seen.append((order, amount))
        return {"order": order, "amount": amount * 2}

    wire = [Ext(1, UUID(int=9).bytes), Ext(2, b"1.25")]
    # When it runs
    outcome = executor.run_sync(Assignment(id="t", name=book.name, args=wire))
    # Then the task got a UUID and a Decimal, and its result is sent in extension form
    assert seen == [(UUID(int=9), Decimal("1.25"))]
    assert outcome.ok, outcome.error
    assert outcome.result["order"].code == 1
    assert (outcome.result["amount"].code, outcome.result["amount"].data) == (2, b"2.50")


def test_arguments_that_do_not_decode_fail_the_task_without_a_retry(
    registry: TaskRegistry, executor: Executor
) -> None:
    @task(registry=registry, max_retries=3)
    def takes(order: UUID) -> None:
        raise AssertionError("never called")

    outcome = executor.run_sync(Assignment(id="t", name=takes.name, args=[Ext(1, b"short")]))
    assert not outcome.ok
    assert outcome.error is not None
    assert "ext code 1 (uuid.UUID) cannot be decoded" in outcome.error.message
    assert outcome.retryable is False


def test_each_task_runs_in_its_declared_pool_and_an_unknown_one_on_a_thread(
    registry: TaskRegistry, executor: Executor
) -> None:
    @task(registry=registry)
    async def coro() -> None:
        return None

    @task(registry=registry)
    def plain() -> None:
        return None

    @task(registry=registry, pool="process")
    def isolated() -> None:
        return None

    assert executor.pool_of(run(coro.name)) == "async"
    assert executor.pool_of(run(plain.name)) == "thread"
    assert executor.pool_of(run(isolated.name)) == "process"
    assert executor.pool_of(run("missing")) == "thread"


async def test_cancelling_run_async_raises_cancelled_error_inside_the_task(
    registry: TaskRegistry, executor: Executor
) -> None:
    entered = asyncio.Event()
    saw_cancel = False

    @task(registry=registry)
    async def forever() -> None:
        nonlocal saw_cancel
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            saw_cancel = True
            raise

    running = asyncio.create_task(executor.run_async(run(forever.name)))
    await asyncio.wait_for(entered.wait(), 5)
    running.cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(running, 5)
    assert saw_cancel


def test_retry_on_matches_subclasses_where_the_exception_lives(
    registry: TaskRegistry, executor: Executor
) -> None:
    # Given a task that retries on ConnectionError (the README's example)
    @task(registry=registry, max_retries=3, retry_on=(ConnectionError,))
    def connect(kind: str) -> None:
        raise {"refused": ConnectionRefusedError, "value": ValueError}[kind](kind)

    # When it raises a subclass, or an unrelated exception
    refused = executor.run_sync(run(connect.name, "t1", "refused"))
    other = executor.run_sync(run(connect.name, "t2", "value"))
    # Then the outcome says whether retry_on covers it, by isinstance, not by name
    assert refused.error is not None
    assert (refused.error.type, refused.retryable) == ("ConnectionRefusedError", True)
    assert other.retryable is False


async def test_an_async_tasks_failure_carries_the_retry_on_verdict_too(
    registry: TaskRegistry, executor: Executor
) -> None:
    @task(registry=registry, retry_on=(OSError,))
    async def fetch() -> None:
        raise TimeoutError("slow")  # a subclass of OSError

    outcome = await asyncio.wait_for(executor.run_async(run(fetch.name)), 5)
    assert outcome.retryable is True


def test_without_retry_on_every_exception_is_retryable_and_an_unknown_task_is_undecided(
    registry: TaskRegistry, executor: Executor
) -> None:
    @task(registry=registry)
    def fail() -> None:
        raise KeyError("k")

    assert executor.run_sync(run(fail.name)).retryable is True
    unknown = executor.run_sync(run("nobody"))
    assert unknown.error is not None
    assert (unknown.error.reason, unknown.retryable) == (FailureReason.EXCEPTION, None)


def test_an_unserializable_result_is_never_retryable(
    registry: TaskRegistry, executor: Executor
) -> None:
    @task(registry=registry, retry_on=(TypeError,))
    def opaque() -> object:
        return object()

    outcome = executor.run_sync(run(opaque.name))
    assert outcome.error is not None
    assert (outcome.error.reason, outcome.retryable) == (FailureReason.UNSERIALIZABLE_RESULT, False)


def nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 5000], ids=["just-past-the-limit", "deep"])
def test_a_result_nested_past_the_protocols_limit_is_an_unserializable_result(
    registry: TaskRegistry, executor: Executor, depth: int
) -> None:
    # Given a task whose result nests deeper than the protocol allows (or msgspec recurses)
    @task(registry=registry)
    def deep() -> object:
        return nested(depth)

    # When it runs
    outcome = executor.run_sync(run(deep.name))
    # Then it is a clear failure, not a crash (nor a frame the control plane would refuse)
    assert outcome.error is not None
    assert outcome.error.reason == FailureReason.UNSERIALIZABLE_RESULT
    assert (
        f"nests deeper than the protocol's {MAX_NESTING} arrays and maps" in outcome.error.message
    )


def test_a_result_nested_exactly_to_the_limit_comes_back(
    registry: TaskRegistry, executor: Executor
) -> None:
    @task(registry=registry)
    def deep() -> object:
        return nested(MAX_NESTING)

    outcome = executor.run_sync(run(deep.name))
    assert (outcome.ok, outcome.result) == (True, nested(MAX_NESTING))
