"""One table of scenarios, each with the outcome a client sees, run against eager mode,
the in-process test ``Cluster`` and a real control plane process with a subworker.

The real processes are the reference: a row where eager mode or the ``Cluster`` sees
something else is a bug in the test double, never a reason to change the expected outcome.
A row eager mode cannot run by design (it has no clock, no queue, no dead letters and no
workflow engine: ``docs/guides/testing.md``, "What eager mode does not do") is marked as
such, strictly, so the day it can run the row the mark has to go.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import it_scenarios as t
import pytest
from harness import Cluster as Processes

from fastworker import Client, FastWorkerError, chord, group
from fastworker.testing import Cluster, eager
from fastworker_protocol import TaskResult

pytestmark = pytest.mark.integration  # the "live" engine starts real processes

ENGINES = ("eager", "cluster", "live")


@dataclass(frozen=True)
class Seen:
    """What a client observes: a final task (or workflow) and its value, or the error the
    call raised."""

    status: str | None = None
    result: Any = None
    error: str | None = None  # the failure's exception type
    reason: str | None = None  # why the last attempt failed
    attempts: int | None = None
    attempt_errors: int | None = None  # the errors the result lists, one per attempt
    raised: str | None = None  # the exception class the client call raised


Run = Callable[[Client], Awaitable[Seen]]


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Run
    expected: Seen
    not_eager: str | None = None  # why eager mode cannot run it (a documented limit)


def seen(result: TaskResult) -> Seen:
    error = result.error
    return Seen(
        status=result.status,
        result=result.result,
        error=None if error is None else error.type,
        reason=None if error is None else error.reason,
        attempts=result.attempts,
        attempt_errors=len(result.attempt_errors),
    )


async def final(client: Client, task_id: str) -> Seen:
    return seen(await client.wait_result(task_id, timeout=30))


def submitting(call: Callable[[Client], Awaitable[str]]) -> Run:
    """Submit with ``call``, wait, and see the result; or see what the call raised."""

    async def run(client: Client) -> Seen:
        try:
            task_id = await call(client)
        except FastWorkerError as exc:
            return Seen(raised=type(exc).__name__)
        return await final(client, task_id)

    return run


async def idempotent(client: Client) -> Seen:
    first = await client.apply_async(t.add, (1, 2), idempotency_key="order-7")
    again = await client.apply_async(t.add, (5, 5), idempotency_key="order-7")
    assert again == first, "the same idempotency key must name the same task"
    return await final(client, first)


async def cancel_finished(client: Client) -> Seen:
    task_id = await client.delay(t.add, 1, 1)
    await client.wait_result(task_id, timeout=30)
    changed = await client.cancel_task(task_id)
    return Seen(**{**vars(await final(client, task_id)), "result": changed})


async def cancel_delayed(client: Client) -> Seen:
    task_id = await client.apply_async(t.add, (1, 1), countdown=3600)
    changed = await client.cancel_task(task_id)
    return Seen(**{**vars(await final(client, task_id)), "result": changed})


async def recorded_priority(client: Client) -> Seen:
    task_id = await client.apply_async(t.add, (1, 2), priority="high")
    result = await client.wait_result(task_id, timeout=30)
    return Seen(status=result.status, result=result.priority, attempts=result.attempts)


async def priority_order(client: Client) -> Seen:
    """Tasks of every priority queued on a paused queue run highest first once resumed
    (one slot runs them, one at a time)."""
    order = ["low", "normal", "high", "critical"]
    await client.pause_queue(t.ORDERED)
    try:
        ids = [await client.apply_async(t.ordered, (p,), priority=p) for p in order]
    finally:
        await client.resume_queue(t.ORDERED)
    results = await client.wait_results(ids, timeout=30)
    runs = sorted((r.result for r in results), key=lambda run: run[1])  # [tag, n-th run]
    return Seen(status="success", result=[tag for tag, _ in runs])


async def retried_message(client: Client) -> Seen:
    task_id = await client.delay(t.explode, "boom")
    error = (await client.wait_result(task_id, timeout=30)).error
    return Seen(result=None if error is None else error.message)


async def cancel_unknown(client: Client) -> Seen:
    try:
        changed = await client.cancel_task("scenario-no-such-task")
    except FastWorkerError as exc:
        return Seen(raised=type(exc).__name__)
    return Seen(result=changed)


async def dead_letter(client: Client) -> Seen:
    task_id = await client.apply_async(t.explode, ("kept",), max_retries=0)
    await client.wait_result(task_id, timeout=30)
    try:
        kept = await client.get_failed(task_id)
    except FastWorkerError as exc:
        return Seen(raised=type(exc).__name__)
    error = kept.error
    return Seen(status=kept.status, result=kept.args, error=None if error is None else error.type)


def workflow(build: Callable[[], Any]) -> Run:
    """Submit a canvas as a workflow: its final state and every step's result."""

    async def run(client: Client) -> Seen:
        try:
            workflow_id = await client.submit_workflow(build())
        except FastWorkerError as exc:
            return Seen(raised=type(exc).__name__)
        info = await client.wait_workflow(workflow_id, timeout=30)
        results = await client.wait_results([s.task_id for s in info.steps], timeout=30)
        return Seen(status=info.state, result=[r.result for r in results])

    return run


def workflow_value(build: Callable[[], Any]) -> Run:
    """Submit a canvas as a workflow and await its handle: the value it leaves."""

    async def run(client: Client) -> Seen:
        try:
            handle = await client.submit_workflow(build())
        except FastWorkerError as exc:
            return Seen(raised=type(exc).__name__)
        value = await handle.get(timeout=30)
        return Seen(status=await handle.status(), result=value)

    return run


NO_WORKFLOWS = "eager mode refuses workflows (documented: no workflow engine)"
NO_CLOCK = "eager mode runs a delayed task at once (documented: no clock)"
NO_QUEUES = "eager mode has no queue: no order, no pause (documented)"
NO_DEAD_LETTERS = "eager mode keeps no dead letters (get_failed is refused)"
SCENARIOS = [
    Scenario(
        "a task that returns succeeds at its first attempt",
        submitting(lambda c: c.delay(t.add, 2, 3)),
        Seen(status="success", result=5, attempts=1, attempt_errors=0),
    ),
    Scenario(
        "a value comes back as msgpack gives it (a tuple is a list)",
        submitting(lambda c: c.delay(t.echo, (1, "two", None))),
        Seen(status="success", result=[1, "two", None], attempts=1, attempt_errors=0),
    ),
    Scenario(
        "a task that always raises is retried max_retries times, then fails",
        submitting(lambda c: c.delay(t.explode, "boom")),
        Seen(
            status="failure", error="RuntimeError", reason="exception", attempts=3, attempt_errors=3
        ),
    ),
    Scenario(
        "after retries, the error lists every attempt's",
        retried_message,
        Seen(
            result="boom (after 3 attempts: attempt 1: RuntimeError: boom; "
            "attempt 2: RuntimeError: boom; attempt 3: RuntimeError: boom)"
        ),
    ),
    Scenario(
        "max_retries=0 at submission fails at the first error",
        submitting(lambda c: c.apply_async(t.explode, ("boom",), max_retries=0)),
        Seen(
            status="failure", error="RuntimeError", reason="exception", attempts=1, attempt_errors=0
        ),
    ),
    Scenario(
        "a negative max_retries at submission is refused",
        submitting(lambda c: c.apply_async(t.explode, ("boom",), max_retries=-1)),
        Seen(raised="RequestRejected"),
    ),
    Scenario(
        "a task that fails twice and then returns succeeds at its third attempt",
        submitting(lambda c: c.delay(t.third_time)),
        Seen(status="success", result=3, attempts=3, attempt_errors=2),
    ),
    Scenario(
        "a task that asks for a retry is tried again, whatever its retry_on",
        submitting(lambda c: c.delay(t.asks_again)),
        Seen(status="success", result=3, attempts=3, attempt_errors=2),
    ),
    Scenario(
        "a task that keeps asking for a retry fails with its error after max_retries",
        submitting(lambda c: c.delay(t.keeps_asking)),
        Seen(status="failure", error="ValueError", reason="retry", attempts=3, attempt_errors=3),
    ),
    Scenario(
        "a workflow handle's value is what the workflow leaves",
        workflow_value(lambda: chord([t.add.s(1, 1), t.add.s(2, 2)], t.total.s())),
        Seen(status="success", result=6),
        not_eager=NO_WORKFLOWS,
    ),
    Scenario(
        "an error outside retry_on is not retried",
        submitting(lambda c: c.delay(t.picky, "bad")),
        Seen(
            status="failure", error="ValueError", reason="exception", attempts=1, attempt_errors=0
        ),
    ),
    Scenario(
        "a subclass of a retry_on error is retried",
        submitting(lambda c: c.delay(t.picky, "reset")),
        Seen(
            status="failure",
            error="ConnectionResetError",
            reason="exception",
            attempts=3,
            attempt_errors=3,
        ),
    ),
    Scenario(
        "a result with no msgpack form fails the task, with no retry",
        submitting(lambda c: c.delay(t.unsendable)),
        Seen(
            status="failure",
            error="TypeError",
            reason="unserializable_result",
            attempts=1,
            attempt_errors=0,
        ),
    ),
    Scenario(
        "a task past its time limit fails with reason timeout, with no retry",
        submitting(lambda c: c.delay(t.slow)),
        Seen(status="failure", error="Timeout", reason="timeout", attempts=1, attempt_errors=0),
    ),
    Scenario(
        "a time limit given at submission stops the task",
        submitting(lambda c: c.apply_async(t.nap, (30,), time_limit=0.2)),
        Seen(status="failure", error="Timeout", reason="timeout", attempts=1, attempt_errors=0),
    ),
    Scenario(
        "a plain function past its time limit fails with reason timeout",
        submitting(lambda c: c.delay(t.block, 0.6)),
        Seen(status="failure", error="Timeout", reason="timeout", attempts=1, attempt_errors=0),
    ),
    Scenario(
        "a task name nobody registered is refused",
        submitting(lambda c: c.delay("scenario_nobody", 1)),
        Seen(raised="UnknownTask"),
    ),
    Scenario(
        "arguments that do not fit the signature are refused",
        submitting(lambda c: c.apply_async(t.add, (1,))),
        Seen(raised="InvalidArguments"),
    ),
    Scenario(
        "the same idempotency key is the same task, run once",
        idempotent,
        Seen(status="success", result=3, attempts=1, attempt_errors=0),
    ),
    Scenario(
        "the priority a task was submitted at is on its result",
        recorded_priority,
        Seen(status="success", result="high", attempts=1),
    ),
    Scenario(
        "tasks waiting in a queue run highest priority first",
        priority_order,
        Seen(status="success", result=["critical", "high", "normal", "low"]),
        not_eager=NO_QUEUES,
    ),
    Scenario(
        "a task that failed for good is kept as a dead letter with its arguments",
        dead_letter,
        Seen(status="failure", result=["kept"], error="RuntimeError"),
        not_eager=NO_DEAD_LETTERS,
    ),
    Scenario(
        "cancelling a task nobody submitted is refused",
        cancel_unknown,
        Seen(raised="TaskNotFound"),
    ),
    Scenario(
        "cancelling a finished task changes nothing",
        cancel_finished,
        Seen(status="success", result=False, attempts=1, attempt_errors=0),
    ),
    Scenario(
        "cancelling a task not due yet cancels it",
        cancel_delayed,
        Seen(status="cancelled", result=True, attempts=0, attempt_errors=0),
        not_eager=NO_CLOCK,
    ),
    Scenario(
        "a chain feeds each result to the next step",
        workflow(lambda: t.add.s(1, 2) | t.add.s(3) | t.add.s(4)),
        Seen(status="success", result=[3, 6, 10]),
        not_eager=NO_WORKFLOWS,
    ),
    Scenario(
        "a group runs every step",
        workflow(lambda: group(t.add.s(1, 1), t.add.s(2, 2), t.add.s(3, 3))),
        Seen(status="success", result=[2, 4, 6]),
        not_eager=NO_WORKFLOWS,
    ),
    Scenario(
        "a chord feeds every header result to its callback",
        workflow(lambda: chord([t.add.s(1, 1), t.add.s(2, 2)], t.total.s())),
        Seen(status="success", result=[2, 4, 6]),
        not_eager=NO_WORKFLOWS,
    ),
]


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    """A real control plane (running no task itself) and one subworker of one slot (so
    waiting tasks run one at a time), for the module."""
    procs = Processes(tmp_path_factory.mktemp("scenarios"))
    try:
        procs.control_plane("--task-modules", "it_scenarios", local_concurrency=0)
        procs.subworker("--task-modules", "it_scenarios", concurrency=1)
        yield procs
    finally:
        procs.stop()


@pytest.fixture(params=ENGINES)
async def client(request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    """A started client of one engine."""
    engine: str = request.param
    if engine == "live":
        procs: Processes = request.getfixturevalue("processes")
        async with procs.client(timeout=30.0) as live:
            await procs.workers(live, 1, timeout=30)
            yield live
        return
    double = (
        eager(t.REGISTRY, propagate=False)
        if engine == "eager"
        else Cluster(t.REGISTRY, concurrency=1)
    )
    with double:
        async with Client() as local:
            yield local


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_every_engine_sees_the_outcome_of_the_real_control_plane(
    scenario: Scenario, client: Client, request: pytest.FixtureRequest
) -> None:
    if scenario.not_eager and request.node.callspec.params["client"] == "eager":
        request.applymarker(pytest.mark.xfail(reason=scenario.not_eager, strict=True))
    assert await scenario.run(client) == scenario.expected
