"""The scheduler heap and the retry policy, with explicit times and a fixed random source."""

from __future__ import annotations

import pytest

from fastworker_control_plane.core.schedule import Schedule
from fastworker_protocol import FailureReason, TaskError, TaskSignature
from fastworker_protocol.attempts import RetryPolicy


def always(task_id: str) -> bool:
    return True


def test_due_tasks_come_out_earliest_first_and_equal_times_in_scheduling_order() -> None:
    schedule = Schedule()
    for due, task_id in [(30.0, "c"), (10.0, "a"), (20.0, "b1"), (20.0, "b2"), (40.0, "d")]:
        schedule.push(due, task_id)
    assert schedule.pop_due(5.0, always) == []
    assert schedule.pop_due(30.0, always) == ["a", "b1", "b2", "c"]
    assert schedule.next_due() == 40.0
    assert len(schedule) == 1


def test_entries_no_longer_waiting_are_skipped() -> None:
    schedule = Schedule()
    schedule.push(1.0, "cancelled")
    schedule.push(2.0, "kept")
    assert schedule.pop_due(5.0, lambda task_id: task_id != "cancelled") == ["kept"]
    assert schedule.next_due() is None


def ceiling(low: float, high: float) -> float:
    """A 'random' source that always picks the top of the range."""
    return high


def test_backoff_doubles_from_the_base_up_to_the_cap() -> None:
    policy = RetryPolicy(max_retries=10, backoff=0.5, backoff_max=5.0)
    assert [policy.delay(n, ceiling) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_backoff_is_full_jitter_between_zero_and_the_ceiling() -> None:
    seen: list[tuple[float, float]] = []

    def record(low: float, high: float) -> float:
        seen.append((low, high))
        return low

    assert RetryPolicy(backoff=2.0).delay(3, record) == 0.0
    assert seen == [(0.0, 8.0)]


def error(kind: str = "RuntimeError", reason: str = FailureReason.EXCEPTION) -> TaskError:
    return TaskError(type=kind, message="x", reason=reason)


def test_a_failure_is_retried_until_max_retries_and_a_submission_may_override_it() -> None:
    policy = RetryPolicy(max_retries=2)
    assert [policy.retries(error(), n, None) for n in range(4)] == [True, True, False, False]
    assert policy.retries(error(), 0, 0) is False
    assert policy.retries(error(), 4, 5) is True


def test_without_a_subworker_verdict_retry_on_is_matched_by_class_name() -> None:
    policy = RetryPolicy(max_retries=3, retry_on=frozenset({"KeyError"}))
    assert policy.retries(error("KeyError"), 0, None) is True
    assert policy.retries(error("ValueError"), 0, None) is False


def test_the_subworkers_verdict_decides_which_exceptions_retry_on_covers() -> None:
    # Given retry_on=(ConnectionError,) and a failure with a subclass the name does not match
    policy = RetryPolicy(max_retries=3, retry_on=frozenset({"ConnectionError"}))
    refused = error("ConnectionRefusedError")
    # Then the subworker's isinstance verdict wins over the name, either way
    assert policy.retries(refused, 0, None, retryable=True) is True
    assert policy.retries(error("ConnectionError"), 0, None, retryable=False) is False
    assert policy.retries(refused, 0, None, retryable=None) is False  # an older subworker


def test_the_budget_still_limits_a_failure_the_subworker_calls_retryable() -> None:
    policy = RetryPolicy(max_retries=1)
    assert [policy.retries(error(), n, None, retryable=True) for n in range(3)] == [
        True,
        False,
        False,
    ]


@pytest.mark.parametrize(
    "reason",
    [
        FailureReason.WORKER_LOST,
        FailureReason.UNSERIALIZABLE_RESULT,
        FailureReason.TIMEOUT,
        FailureReason.CANCELLED,
        FailureReason.INTERRUPTED,
    ],
)
def test_failures_that_are_not_exceptions_are_never_retried(reason: FailureReason) -> None:
    policy = RetryPolicy(max_retries=3)
    assert policy.retries(error(reason=reason), 0, None) is False
    assert policy.retries(error(reason=reason), 0, None, retryable=True) is False


def test_the_policy_comes_from_the_registered_signature() -> None:
    signature = TaskSignature(
        name="t", max_retries=4, retry_backoff=0.1, retry_backoff_max=3.0, retry_on=["OSError"]
    )
    assert RetryPolicy.of(signature) == RetryPolicy(4, 0.1, 3.0, frozenset({"OSError"}))
