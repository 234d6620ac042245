"""TaskBoard submissions and queries: validation, atomic batches, idempotency by id."""

from __future__ import annotations

from typing import Any

import pytest

from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import (
    ErrorCode,
    Outcome,
    Param,
    Priority,
    TaskSignature,
    TaskSpec,
    TaskState,
)

NOW = 1000.0
ADD = TaskSignature(
    name="add", params=[Param(name=p, kind="POSITIONAL_OR_KEYWORD") for p in ("x", "y")]
)


def spec(task_id: str = "", name: str = "add", *args: Any, **kwargs: Any) -> TaskSpec:
    return TaskSpec(name=name, id=task_id, args=list(args or (1, 2)), kwargs=kwargs)


def board_knowing_add(**config: Any) -> TaskBoard:
    board = TaskBoard(BoardConfig(**config))
    board.learn_tasks([ADD])
    return board


def finish(board: TaskBoard, task_id: str, now: float) -> None:
    """Run one queued task to SUCCESS on a throwaway worker."""
    board.register("finisher", "finisher", 1, [ADD], now)
    assert board.dispatch(["finisher"])[0]
    board.report("finisher", [], [Outcome(task_id=task_id, ok=True, result=3)], now)
    board.remove_worker("finisher", now)


def test_an_accepted_task_is_queued_with_its_priority_and_submission_time() -> None:
    board = board_knowing_add()

    ids = board.submit([spec("t1")], Priority.HIGH, NOW)[0]

    assert ids == ["t1"]
    result = board.get("t1", NOW)
    assert result is not None
    assert (result.status, result.priority, result.submitted_at) == (
        TaskState.QUEUED,
        Priority.HIGH,
        NOW,
    )
    assert board.queues.depth(Priority.HIGH) == 1


def test_an_unknown_task_name_rejects_the_whole_batch_naming_its_index() -> None:
    board = board_knowing_add()

    with pytest.raises(Rejected) as caught:
        board.submit([spec("ok"), spec("bad", "mul")], Priority.NORMAL, NOW)

    assert caught.value.code == ErrorCode.UNKNOWN_TASK
    assert caught.value.detail == {"index": 1, "task_name": "mul"}
    assert "mul" in caught.value.message
    assert len(board) == 0
    assert len(board.queues) == 0
    assert board.get("ok", NOW) is None


def test_bad_arguments_reject_the_whole_batch_naming_its_index() -> None:
    board = board_knowing_add()

    with pytest.raises(Rejected) as caught:
        board.submit([spec("ok"), spec("ok2"), spec("bad", "add", 1, 2, 3)], Priority.LOW, NOW)

    assert caught.value.code == ErrorCode.INVALID_ARGUMENTS
    assert caught.value.detail == {"index": 2, "task_name": "add"}
    assert caught.value.message.startswith("add(): ")
    assert len(board) == 0
    assert len(board.queues) == 0


def test_a_duplicate_id_is_accepted_but_queued_only_once() -> None:
    board = board_knowing_add()
    board.submit([spec("t1")], Priority.NORMAL, NOW)

    again = board.submit([spec("t1")], Priority.NORMAL, NOW + 1.5)[0]

    assert again == ["t1"]
    assert len(board) == 1
    assert len(board.queues) == 1
    result = board.get("t1", NOW + 1.5)
    assert result is not None
    assert result.submitted_at == NOW


def test_a_duplicate_id_within_one_batch_is_queued_once() -> None:
    board = board_knowing_add()

    ids = board.submit([spec("t1"), spec("t1")], Priority.NORMAL, NOW)[0]

    assert ids == ["t1", "t1"]
    assert len(board.queues) == 1


def test_a_finished_task_is_not_run_again_when_its_id_is_resubmitted() -> None:
    board = board_knowing_add()
    board.submit([spec("t1")], Priority.NORMAL, NOW)
    finish(board, "t1", NOW + 1)

    again = board.submit([spec("t1")], Priority.NORMAL, NOW + 2)[0]

    assert again == ["t1"]
    assert len(board) == 0
    assert len(board.queues) == 0
    result = board.get("t1", NOW + 2)
    assert result is not None
    assert result.status == TaskState.SUCCESS


def test_an_id_whose_result_has_expired_is_queued_again() -> None:
    board = board_knowing_add(result_ttl=60.0)
    board.submit([spec("t1")], Priority.NORMAL, NOW)
    finish(board, "t1", NOW + 1)

    board.submit([spec("t1")], Priority.NORMAL, NOW + 100)

    result = board.get("t1", NOW + 100)
    assert result is not None
    assert result.status == TaskState.QUEUED


def test_an_id_whose_expired_result_was_swept_is_queued_again() -> None:
    board = board_knowing_add(result_ttl=60.0)
    board.submit([spec("t1")], Priority.NORMAL, NOW)
    finish(board, "t1", NOW + 1)
    board.results.sweep(NOW + 100)

    board.submit([spec("t1")], Priority.NORMAL, NOW + 100)

    assert len(board.queues) == 1


def test_an_empty_id_gets_a_fresh_generated_id() -> None:
    board = board_knowing_add()

    ids = board.submit([spec(""), spec("")], Priority.NORMAL, NOW)[0]

    assert len(set(ids)) == 2
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert all(board.get(i, NOW) is not None for i in ids)


def test_learned_tasks_can_be_submitted_before_any_worker_registers() -> None:
    board = TaskBoard()
    with pytest.raises(Rejected):
        board.submit([spec("t1")], Priority.NORMAL, NOW)

    board.learn_tasks([ADD, TaskSignature(name="ping")])

    assert board.known_task_names() == ["add", "ping"]
    assert board.submit([spec("t1"), TaskSpec(name="ping", id="t2")], Priority.NORMAL, NOW)[0]
    assert len(board.queues) == 2


def test_learning_an_invalid_signature_is_rejected_and_learns_nothing() -> None:
    board = TaskBoard()
    bad = TaskSignature(
        name="bad",
        params=[
            Param(name="a", kind="POSITIONAL_OR_KEYWORD", has_default=True),
            Param(name="b", kind="POSITIONAL_OR_KEYWORD"),
        ],
    )

    with pytest.raises(Rejected) as caught:
        board.learn_tasks([ADD, bad])

    assert caught.value.code == ErrorCode.INVALID_MESSAGE
    assert board.known_task_names() == []


def test_get_returns_live_snapshots_then_cached_results_until_they_expire() -> None:
    board = board_knowing_add(result_ttl=60.0)
    board.submit([spec("t1")], Priority.NORMAL, NOW)
    live = board.get("t1", NOW)
    assert live is not None
    assert live.status == TaskState.QUEUED

    finish(board, "t1", NOW + 1)

    cached = board.get("t1", NOW + 2)
    assert cached is not None
    assert (cached.status, cached.result, cached.finished_at) == (TaskState.SUCCESS, 3, NOW + 1)
    assert board.get("t1", NOW + 61) is None
    assert board.get("never", NOW) is None


def test_list_tasks_shows_the_newest_first_and_honours_status_and_limit() -> None:
    board = board_knowing_add()
    board.submit([spec("t1")], Priority.NORMAL, NOW)
    finish(board, "t1", NOW + 1)
    board.submit([spec("t2"), spec("t3"), spec("t4")], Priority.NORMAL, NOW + 2)

    everything = [r.task_id for r in board.list_tasks(None, 100, NOW + 3)]
    queued = [r.task_id for r in board.list_tasks(TaskState.QUEUED, 2, NOW + 3)]
    done = [r.task_id for r in board.list_tasks(TaskState.SUCCESS, 100, NOW + 3)]

    assert everything == ["t4", "t3", "t2", "t1"]
    assert queued == ["t4", "t3"]
    assert done == ["t1"]
    assert board.list_tasks(None, 0, NOW + 3) == []
    assert board.list_tasks(None, -5, NOW + 3) == []


def test_reading_a_result_does_not_change_its_place_in_the_listing() -> None:
    board = board_knowing_add()
    board.submit([spec("old")], Priority.NORMAL, NOW)
    finish(board, "old", NOW + 1)
    board.submit([spec("new")], Priority.NORMAL, NOW + 2)
    finish(board, "new", NOW + 3)

    board.get("old", NOW + 4)

    assert [r.task_id for r in board.list_tasks(None, 10, NOW + 4)] == ["new", "old"]
