"""Rate and concurrency limits (``core/limits``) and the stride fair share, as pure logic."""

from __future__ import annotations

from typing import Any

import pytest

from fastworker_control_plane.core.fair_share import FairShare
from fastworker_control_plane.core.limits import Limits, Scope, TokenBucket
from fastworker_control_plane.core.records import TaskRecord
from fastworker_protocol import Param, Priority, Rate, TaskSignature, parse_queues


def record(task_id: str, name: str = "imp", *args: object, queue: str = "default") -> TaskRecord:
    r = TaskRecord(task_id, name, Priority.NORMAL, list(args), {}, {}, 0.0)
    r.queue = queue
    return r


def signature(name: str = "imp", **limits: Any) -> TaskSignature:
    params = [Param(name=p, kind="POSITIONAL_OR_KEYWORD") for p in ("customer_id", "path")]
    return TaskSignature(name=name, params=params, **limits)


# --- rates and queue lists ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "count", "per"),
    [("20/m", 20, 60), ("10/s", 10, 1), ("1.5/h", 1.5, 3600), (" 3 / s ", 3, 1)],
)
def test_a_rate_reads_a_count_per_second_minute_or_hour(
    text: str, count: float, per: float
) -> None:
    assert Rate.parse(text) == Rate(count, per)


@pytest.mark.parametrize("text", ["", "20", "0/s", "-1/s", "10/d", "ten/s", "10/s/s"])
def test_a_bad_rate_is_refused_saying_the_form(text: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. '20/m'"):
        Rate.parse(text)


def test_a_queue_list_takes_weights_one_by_default() -> None:
    assert parse_queues("reports:1, default:4,gpu") == {"reports": 1, "default": 4, "gpu": 1}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no queue named"),
        (",", "no queue named"),
        ("a b", "bad queue name"),
        ("a:0", "bad weight"),
        ("a:x", "bad weight"),
        ("a:1001", "bad weight"),
    ],
)
def test_a_bad_queue_list_is_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_queues(text)


# --- the token bucket --------------------------------------------------------------------------


def test_a_bucket_starts_full_and_refills_at_its_rate() -> None:
    bucket = TokenBucket(Rate(10, 1))  # burst: a tenth of a second = 1 token
    assert bucket.has_token(100.0)
    bucket.take(100.0)
    assert not bucket.has_token(100.05)
    assert bucket.next_token_at(100.05) == pytest.approx(100.1)
    assert bucket.has_token(100.1)


def test_a_fast_bucket_holds_a_tenth_of_a_second_of_its_rate() -> None:
    bucket = TokenBucket(Rate(100, 1))
    for _ in range(10):
        assert bucket.has_token(5.0)
        bucket.take(5.0)
    assert not bucket.has_token(5.0)


def test_starts_in_any_window_never_exceed_rate_times_window_plus_burst() -> None:
    bucket, starts, now = TokenBucket(Rate(10, 1)), [], 0.0
    while now < 5.0:
        if bucket.has_token(now):
            bucket.take(now)
            starts.append(now)
        now = round(now + 0.001, 3)
    for first in starts:
        assert sum(1 for s in starts if first <= s < first + 1.0) <= 10 + 1
    assert 49 <= len(starts) <= 51


# --- limits ------------------------------------------------------------------------------------


def test_a_declared_concurrency_limit_counts_per_key_value() -> None:
    limits = Limits()
    limits.declare([signature(concurrency_limit=1, concurrency_key="customer_id")])
    first, same, other = record("a", "imp", 7), record("b", "imp", 7), record("c", "imp", 8)

    limits.acquire(first, 0.0)

    assert not limits.key_open(same)
    assert limits.key_open(other)
    assert limits.closed_names(0.0) == set()  # a keyed limit closes keys, not the name
    assert limits.release("a") == limits.key_value(same)
    assert limits.key_open(same)


def test_a_key_given_by_keyword_or_left_to_its_default_is_counted_too() -> None:
    limits = Limits()
    limits.declare([signature(concurrency_limit=1, concurrency_key="path")])
    by_keyword = record("a", "imp", 1)
    by_keyword.kwargs = {"path": "/x"}
    positional = record("b", "imp", 2, "/x")

    assert limits.key_value(by_keyword) == limits.key_value(positional)
    assert limits.key_value(record("c", "imp", 1)) != limits.key_value(positional)


def test_a_concurrency_limit_without_a_key_closes_the_name() -> None:
    limits = Limits()
    limits.declare([signature(concurrency_limit=2)])
    limits.acquire(record("a"), 0.0)
    assert limits.closed_names(0.0) == set()
    limits.acquire(record("b"), 0.0)
    assert limits.closed_names(0.0) == {"imp"}
    limits.release("a")
    assert limits.closed_names(0.0) == set()


def test_a_spent_rate_closes_the_name_until_its_next_token() -> None:
    limits = Limits()
    limits.declare([signature(rate_limit="2/s")])
    limits.acquire(record("a"), 10.0)
    assert limits.name_closed("imp", 10.0)
    assert limits.next_token_at(10.0) == pytest.approx(10.5)
    assert not limits.name_closed("imp", 10.5)


def test_a_run_time_setting_wins_over_the_declared_one_until_reset() -> None:
    limits = Limits()
    limits.declare([signature(concurrency_limit=1)])
    limits.change(Scope.TASK, "imp", None, 3)
    assert limits.get(Scope.TASK, "imp").concurrency == 3  # type: ignore[union-attr]
    limits.change(Scope.TASK, "imp", "off", 0)
    assert limits.closed_names(0.0) == set()
    limits.change(Scope.TASK, "imp", None, None, reset=True)
    assert limits.get(Scope.TASK, "imp").concurrency == 1  # type: ignore[union-attr]
    assert limits.settings == {}


def test_a_queue_limit_counts_the_tasks_of_every_name_in_it() -> None:
    limits = Limits()
    limits.change(Scope.QUEUE, "reports", None, 1)
    limits.acquire(record("a", "x", queue="reports"), 0.0)
    assert not limits.queue_open("reports", 0.0)
    assert limits.queue_open("default", 0.0)
    limits.release("a")
    assert limits.queue_open("reports", 0.0)


def test_lifting_a_limit_with_tasks_running_still_counts_them_out() -> None:
    limits = Limits()
    limits.change(Scope.QUEUE, "q", None, 1)
    limits.acquire(record("a", queue="q"), 0.0)
    limits.change(Scope.QUEUE, "q", None, 0)
    assert limits.queue_open("q", 0.0)
    assert limits  # still counting "a"
    limits.release("a")
    assert limits.get(Scope.QUEUE, "q") is None
    assert not limits  # nothing in effect: dispatch skips limit bookkeeping


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"rate_limit": "lots"}, "bad rate"),
        ({"concurrency_limit": 1, "concurrency_key": "nope"}, "not a named parameter"),
        ({"concurrency_key": "path"}, "needs a concurrency_limit"),
    ],
)
def test_a_bad_declaration_is_refused(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Limits().declare([signature(**fields)])


# --- fair share --------------------------------------------------------------------------------


def test_backlogged_queues_are_served_in_proportion_to_their_weights() -> None:
    share = FairShare({"reports": 1, "default": 4})
    served = []
    for _ in range(500):
        queue = share.order(["reports", "default"])[0]
        share.served(queue)
        served.append(queue)
    assert served.count("default") == 400
    assert served.count("reports") == 100


def test_an_idle_queue_earns_no_credit_to_burst_with_later() -> None:
    share = FairShare({"a": 1, "b": 1})
    for _ in range(100):  # only a has work
        share.served(share.order(["a"])[0])
    next_ten = []
    for _ in range(10):
        queue = share.order(["a", "b"])[0]
        share.served(queue)
        next_ten.append(queue)
    assert next_ten.count("b") <= 6


def test_queues_the_worker_does_not_serve_are_left_out() -> None:
    assert FairShare({"a": 1}).order(["b", "a"]) == ["a"]
