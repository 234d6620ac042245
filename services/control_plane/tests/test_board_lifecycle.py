"""Delayed tasks and retries on the task board, with explicit ``now`` values."""

from __future__ import annotations

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.entropy import counting
from fastworker_protocol import (
    Outcome,
    Priority,
    TaskError,
    TaskSignature,
    TaskSpec,
    TaskState,
)

NOW = 1000.0


def ceiling(low: float, high: float) -> float:
    return high


def board_with_worker(max_retries: int = 0) -> TaskBoard:
    board = TaskBoard(entropy=counting(ceiling))
    signature = TaskSignature(name="t", max_retries=max_retries, retry_backoff=1.0)
    board.register("w", "w", 4, [signature], NOW)
    return board


def fail(board: TaskBoard, task_id: str, now: float) -> None:
    board.dispatch(["w"])
    outcome = Outcome(
        task_id=task_id, ok=False, error=TaskError(type="RuntimeError", message=f"at {now}")
    )
    board.report("w", [], [outcome], now)


def state(board: TaskBoard, task_id: str, now: float = NOW) -> TaskState:
    result = board.get(task_id, now)
    assert result is not None
    return result.status


def test_a_task_with_an_eta_waits_scheduled_and_is_queued_when_due() -> None:
    board = board_with_worker()
    [task_id] = board.submit([TaskSpec(name="t", id="d", eta=NOW + 10)], Priority.NORMAL, NOW)[0]
    assert state(board, task_id) == TaskState.SCHEDULED
    assert board.dispatch(["w"])[0] == {}
    assert board.release_due(NOW + 9.9).queued == 0
    assert board.release_due(NOW + 10).queued == 1
    assert state(board, task_id) == TaskState.QUEUED
    assert [a.id for a in board.dispatch(["w"])[0]["w"]] == ["d"]


def test_an_eta_in_the_past_queues_at_once() -> None:
    board = board_with_worker()
    board.submit([TaskSpec(name="t", id="late", eta=NOW - 5)], Priority.NORMAL, NOW)
    assert state(board, "late") == TaskState.QUEUED


def test_a_failed_attempt_with_retries_left_waits_its_backoff_then_runs_again() -> None:
    board = board_with_worker(max_retries=2)
    board.submit([TaskSpec(name="t", id="r")], Priority.NORMAL, NOW)
    fail(board, "r", NOW)
    assert state(board, "r") == TaskState.RETRYING
    assert board.release_due(NOW + 0.99).queued == 0
    assert board.release_due(NOW + 1.0).queued == 1  # first retry: up to 1 s
    fail(board, "r", NOW + 1)
    assert board.release_due(NOW + 2.99).queued == 0
    assert board.release_due(NOW + 3.0).queued == 1  # second retry: up to 2 s
    fail(board, "r", NOW + 3)
    final = board.get("r", NOW + 3)
    assert final is not None
    assert (final.status, final.attempts, len(final.attempt_errors)) == (TaskState.FAILURE, 3, 3)
    assert final.error is not None
    assert final.error.message.startswith("at 1003.0 (after 3 attempts: attempt 1:")


def test_a_retrying_or_delayed_task_can_be_cancelled_and_never_runs() -> None:
    board = board_with_worker(max_retries=1)
    board.submit(
        [TaskSpec(name="t", id="r"), TaskSpec(name="t", id="d", eta=NOW + 5)], Priority.NORMAL, NOW
    )
    board.dispatch(["w"])  # "r" assigned; "d" is scheduled
    board.report(
        "w", [], [Outcome(task_id="r", ok=False, error=TaskError(type="E", message="m"))], NOW
    )
    assert bool(board.cancel("r", NOW)[1].finished) is True
    assert bool(board.cancel("d", NOW)[1].finished) is True
    assert board.release_due(NOW + 100).queued == 0
    assert board.dispatch(["w"])[0] == {}
    assert state(board, "r") == state(board, "d") == TaskState.CANCELLED
