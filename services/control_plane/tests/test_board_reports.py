"""TaskBoard reports and cancel: running, finishing, requeueing, and late outcomes."""

from __future__ import annotations

import pytest

from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import (
    ErrorCode,
    Outcome,
    Param,
    Priority,
    TaskError,
    TaskSignature,
    TaskSpec,
    TaskState,
)

NOW = 1000.0
ADD = TaskSignature(name="add", params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])


def board_with(*workers: str, concurrency: int = 4, max_redeliveries: int = 3) -> TaskBoard:
    board = TaskBoard(BoardConfig(max_redeliveries=max_redeliveries))
    for worker_id in workers:
        board.register(worker_id, f"host-{worker_id}", concurrency, [ADD], NOW)
    return board


def submit(board: TaskBoard, *task_ids: str, priority: Priority = Priority.NORMAL) -> None:
    board.submit([TaskSpec(name="add", id=t, args=[1]) for t in task_ids], priority, NOW)


def assigned(board: TaskBoard, worker_id: str) -> list[str]:
    return [a.id for a in board.dispatch([worker_id])[0].get(worker_id, [])]


def status(board: TaskBoard, task_id: str, now: float = NOW + 10) -> TaskState:
    result = board.get(task_id, now)
    assert result is not None
    return result.status


def test_a_started_report_moves_an_assigned_task_to_running() -> None:
    board = board_with("w1")
    submit(board, "t1")
    assigned(board, "w1")

    finished = board.report("w1", ["t1"], [], NOW + 1.5).finished

    assert finished == []
    result = board.get("t1", NOW + 1.5)
    assert result is not None
    assert (result.status, result.started_at) == (TaskState.RUNNING, NOW + 1.5)


def test_an_outcome_reported_without_its_start_still_passes_through_running() -> None:
    # A task so quick that its start and its end reach the same report
    board = board_with("w1")
    submit(board, "t1")
    assigned(board, "w1")
    effects = board.report(
        "w1", [], [Outcome(task_id="t1", ok=True, result=2)], NOW + 1, record=True
    )

    states = [c.state for c in effects.changes if c.task_id == "t1"]
    assert states == [TaskState.RUNNING, TaskState.SUCCESS]


def test_a_successful_outcome_finishes_the_task_and_frees_the_slot() -> None:
    board = board_with("w1", concurrency=1)
    submit(board, "t1", "t2")
    assigned(board, "w1")
    board.report("w1", ["t1"], [], NOW + 1)

    finished = board.report("w1", [], [Outcome(task_id="t1", ok=True, result=42)], NOW + 2).finished

    assert [(r.task_id, r.status, r.result, r.finished_at) for r in finished] == [
        ("t1", TaskState.SUCCESS, 42, NOW + 2)
    ]
    assert len(board) == 1  # only t2 is still live
    assert board.list_workers(NOW + 2)[0].completed == 1
    assert assigned(board, "w1") == ["t2"]


def test_a_failed_outcome_finishes_the_task_with_its_error() -> None:
    board = board_with("w1")
    submit(board, "t1")
    assigned(board, "w1")
    error = TaskError(type="ZeroDivisionError", message="division by zero", traceback="tb")

    finished = board.report(
        "w1", [], [Outcome(task_id="t1", ok=False, error=error)], NOW + 1
    ).finished

    assert [(r.status, r.error) for r in finished] == [(TaskState.FAILURE, error)]
    assert finished[0].started_at == NOW + 1  # never reported started: the outcome's time


def test_a_failure_without_an_error_gets_a_generic_one() -> None:
    board = board_with("w1")
    submit(board, "t1")
    assigned(board, "w1")

    [result] = board.report("w1", [], [Outcome(task_id="t1", ok=False)], NOW + 1).finished

    assert result.error is not None
    assert result.error.message == "unknown failure"


def test_an_outcome_asking_for_requeue_is_redelivered() -> None:
    board = board_with("w1")
    submit(board, "t1")
    assigned(board, "w1")

    finished = board.report(
        "w1", [], [Outcome(task_id="t1", ok=False, requeue=True)], NOW + 1
    ).finished

    assert finished == []
    assert status(board, "t1") == TaskState.QUEUED
    assert assigned(board, "w1") == ["t1"]


def test_a_late_outcome_from_a_removed_worker_is_refused_and_changes_nothing() -> None:
    board = board_with("w1", "w2")
    submit(board, "t1")
    assigned(board, "w1")
    board.remove_worker("w1", NOW + 1)
    assigned(board, "w2")

    with pytest.raises(Rejected) as caught:
        board.report("w1", [], [Outcome(task_id="t1", ok=True, result=1)], NOW + 2)

    assert caught.value.code == ErrorCode.UNKNOWN_WORKER
    assert status(board, "t1") == TaskState.ASSIGNED


def test_a_late_outcome_after_the_worker_re_registered_wins_and_stops_the_second_run() -> None:
    board = board_with("w1", "w2")
    submit(board, "t1")
    assigned(board, "w1")
    board.register("w1", "host-w1", 4, [ADD], NOW + 1)  # expelled, back: t1 is redelivered
    assert assigned(board, "w2") == ["t1"]

    effects = board.report("w1", [], [Outcome(task_id="t1", ok=True, result=1)], NOW + 2)
    [finished] = effects.finished

    assert (finished.status, finished.result, finished.worker_id) == (TaskState.SUCCESS, 1, "w1")
    assert effects.superseded == [("w2", "t1")]
    assert (
        board.report("w2", [], [Outcome(task_id="t1", ok=True, result=2)], NOW + 3).finished == []
    )


def test_an_outcome_for_a_task_queued_again_finishes_it_and_it_is_not_dispatched() -> None:
    board = board_with("w1")
    submit(board, "t1")
    assigned(board, "w1")
    board.register("w1", "host-w1", 4, [ADD], NOW + 1)  # t1 queued again, not yet sent
    assert status(board, "t1") == TaskState.QUEUED

    effects = board.report("w1", [], [Outcome(task_id="t1", ok=True, result=1)], NOW + 2)
    [finished] = effects.finished

    assert (finished.status, finished.result) == (TaskState.SUCCESS, 1)
    assert assigned(board, "w1") == []
    assert len(board.queues) == 0


def test_cancelling_a_running_task_discards_its_eventual_outcome() -> None:
    board = board_with("w1")
    submit(board, "t1")
    assigned(board, "w1")
    board.report("w1", ["t1"], [], NOW + 1)

    result, effects = board.cancel("t1", NOW + 2)
    changed = bool(effects.finished)
    late = board.report("w1", [], [Outcome(task_id="t1", ok=True, result=1)], NOW + 3).finished

    assert (result.status, changed, late) == (TaskState.CANCELLED, True, [])
    assert status(board, "t1") == TaskState.CANCELLED
    assert board.list_workers(NOW + 3)[0].in_flight == 0


def test_cancelling_a_final_task_changes_nothing() -> None:
    board = board_with("w1")
    submit(board, "t1")
    assigned(board, "w1")
    board.report("w1", [], [Outcome(task_id="t1", ok=True, result=5)], NOW + 1)

    result, effects = board.cancel("t1", NOW + 2)
    changed = bool(effects.finished)

    assert (result.status, result.result, changed) == (TaskState.SUCCESS, 5, False)


def test_cancelling_an_unknown_task_is_rejected_as_not_found() -> None:
    with pytest.raises(Rejected) as caught:
        TaskBoard().cancel("nope", NOW)

    assert caught.value.code == ErrorCode.TASK_NOT_FOUND
