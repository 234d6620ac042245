"""``@task(queue=, rate_limit=, concurrency_limit=, concurrency_key=)`` and the queue a
submission goes to: checked when decorating and when submitting, before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest

from fastworker import task
from fastworker._calls import BatchItem, batch_specs, limit_change, queue_action, task_spec
from fastworker._task import TaskRegistry


def test_a_task_declares_its_queue_and_limits_in_its_registration() -> None:
    @task(
        queue="imports",
        rate_limit="20/m",
        concurrency_limit=1,
        concurrency_key="customer_id",
        registry=TaskRegistry(),
    )
    def import_file(customer_id: int, path: str) -> None: ...

    signature = import_file.signature()

    assert (signature.queue, signature.rate_limit) == ("imports", "20/m")
    assert (signature.concurrency_limit, signature.concurrency_key) == (1, "customer_id")


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"queue": "bad queue"}, "bad queue name"),
        ({"rate_limit": "20 per minute"}, "bad rate limit"),
        ({"concurrency_limit": 0}, "at least 1"),
        ({"concurrency_key": "customer_id"}, "needs a concurrency_limit"),
        ({"concurrency_limit": 1, "concurrency_key": "nope"}, "not a named parameter"),
        ({"concurrency_limit": 1, "concurrency_key": "rest"}, "not a named parameter"),
    ],
)
def test_a_bad_queue_or_limit_is_refused_when_decorating(
    options: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):

        @task(registry=TaskRegistry(), **options)
        def job(customer_id: int, *rest: int) -> None: ...


def test_a_submission_goes_to_the_given_queue_else_the_tasks_own() -> None:
    @task(queue="reports", registry=TaskRegistry())
    def build(n: int) -> int:
        return n

    assert task_spec(build, [1], None).queue == "reports"
    assert task_spec(build, [1], None, queue="urgent").queue == "urgent"
    assert task_spec("build", [1], None).queue is None  # by name: the registration decides


def test_a_bad_queue_is_refused_before_sending() -> None:
    with pytest.raises(ValueError, match="bad queue name"):
        task_spec("build", [1], None, queue="no spaces")
    with pytest.raises(ValueError, match="bad queue name"):
        queue_action("a/b", "pause")


def test_batch_items_carry_their_queue() -> None:
    _, chunks = batch_specs(
        [BatchItem("a", (1,), queue="q1"), {"task_name": "a", "args": [2], "queue": "q2"}]
    )
    ((_, specs),) = chunks
    assert [s.queue for s in specs] == ["q1", "q2"]


@pytest.mark.parametrize(
    ("scope", "rate", "concurrency", "problem"),
    [
        ("pool", None, 1, "scope must be"),
        ("queue", "fast", None, "bad rate limit"),
        ("task", None, -1, "0 \\(no limit\\) or more"),
    ],
)
def test_a_bad_limit_change_is_refused_before_sending(
    scope: str, rate: str | None, concurrency: int | None, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        limit_change(scope, "q", rate, concurrency, reset=False)


def test_off_and_zero_lift_a_limit() -> None:
    change = limit_change("queue", "q", "off", 0, reset=True)
    assert (change.rate_limit, change.concurrency_limit, change.reset) == ("off", 0, True)
