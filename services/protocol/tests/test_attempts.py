"""An eager task's life follows the board's rules: the protocol's transition table, one
attempt per assignment, retries only of exceptions within the budget."""

from __future__ import annotations

import pytest

from fastworker_protocol import FailureReason, TaskError, TaskState
from fastworker_protocol.attempts import Life
from fastworker_protocol.states import InvalidTransition

BOOM = TaskError(type="RuntimeError", message="boom", reason=FailureReason.EXCEPTION)
LATE = TaskError(type="Timeout", message="late", reason=FailureReason.TIMEOUT)


def test_a_task_that_succeeds_at_once_has_one_attempt_and_no_attempt_errors() -> None:
    life = Life(3, delayed=False)
    queued = life.state
    number = life.start()
    running = life.state
    life.succeeded()
    assert (queued, number, running) == (TaskState.QUEUED, 1, TaskState.RUNNING)
    assert (life.state, life.attempts, life.errors(None)) == (TaskState.SUCCESS, 1, (None, []))


def test_a_delayed_task_is_scheduled_then_due_before_it_runs() -> None:
    life = Life(0, delayed=True)
    due = life.state  # eager mode waits for no ETA
    life.start()
    life.succeeded()
    assert (due, life.state) == (TaskState.QUEUED, TaskState.SUCCESS)


def test_failures_are_retried_within_the_budget_and_summarized_at_the_end() -> None:
    life = Life(2, delayed=False)
    retried = []
    for _ in range(3):
        life.start()
        retried.append(life.failed(BOOM, retryable=True))
    assert retried == [True, True, False]
    assert (life.state, life.attempts) == (TaskState.FAILURE, 3)
    error, attempt_errors = life.errors(BOOM)
    assert attempt_errors == [BOOM] * 3
    assert error is not None
    assert error.message.startswith("boom (after 3 attempts: attempt 1: RuntimeError: boom;")


def test_a_single_failed_attempt_lists_no_attempt_errors() -> None:
    life = Life(0, delayed=False)
    life.start()
    assert not life.failed(BOOM, retryable=True)
    assert life.errors(BOOM) == (BOOM, [])


@pytest.mark.parametrize(
    ("error", "retryable", "max_retries"),
    [(LATE, True, 3), (BOOM, False, 3), (BOOM, True, 0), (BOOM, True, -1)],
    ids=["a timeout", "outside retry_on", "no retries", "a negative budget"],
)
def test_what_the_board_never_retries_is_never_retried(
    error: TaskError, retryable: bool, max_retries: int
) -> None:
    life = Life(max_retries, delayed=False)
    life.start()
    assert not life.failed(error, retryable)
    assert life.state == TaskState.FAILURE


def test_a_final_task_cannot_run_again() -> None:
    life = Life(0, delayed=False)
    life.start()
    life.succeeded()
    with pytest.raises(InvalidTransition):
        life.start()
