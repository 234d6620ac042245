"""TaskBoard workers: registration, liveness, and redelivery of what a lost worker held."""

from __future__ import annotations

import pytest

from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.entropy import counting
from fastworker_control_plane.core.lifecycle import MAX_RETURNS
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import (
    ErrorCode,
    FailureReason,
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


def test_a_lost_worker_s_tasks_go_back_to_the_front_of_their_priority() -> None:
    board = board_with("w1", "w2", concurrency=1)
    submit(board, "t1")
    assigned(board, "w1")
    submit(board, "t2")

    finished = board.remove_worker("w1", NOW + 1).finished

    assert finished == []
    assert status(board, "t1") == TaskState.QUEUED
    plan = board.dispatch(["w2"])[0]
    assert [(a.id, a.attempt) for a in plan["w2"]] == [("t1", 2)]


def test_a_lost_worker_s_tasks_keep_their_relative_order() -> None:
    held = [f"t{i:02d}" for i in range(20)]
    board = board_with("w1", "w2", concurrency=len(held))
    submit(board, *held)
    assert assigned(board, "w1") == held

    board.remove_worker("w1", NOW + 1)

    assert assigned(board, "w2") == held


def test_a_started_task_lost_more_than_max_redeliveries_times_fails_as_worker_lost() -> None:
    board = board_with("w1", max_redeliveries=1)
    submit(board, "t1")
    assigned(board, "w1")
    board.report("w1", ["t1"], [], NOW)
    assert board.remove_worker("w1", NOW + 1).finished == []
    board.register("w1", "host-w1", 4, [ADD], NOW + 2)
    assert assigned(board, "w1") == ["t1"]
    board.report("w1", ["t1"], [], NOW + 2)

    [result] = board.remove_worker("w1", NOW + 3).finished

    assert (result.status, result.attempts) == (TaskState.FAILURE, 2)
    assert result.error is not None
    assert result.error.reason == "worker_lost"
    assert len(board) == 0


def test_silent_remote_workers_expire_and_their_tasks_are_redelivered() -> None:
    board = board_with("quiet", "chatty")
    board.register("local", "me", 1, [ADD], NOW, local=True)
    submit(board, "t1")
    assigned(board, "quiet")
    board.touch("chatty", NOW + 20)

    removed, effects = board.expire_silent(NOW + 31, timeout=30.0)
    finished = effects.finished

    assert (removed, finished) == (["quiet"], [])
    assert sorted(w.worker_id for w in board.list_workers(NOW + 31)) == ["chatty", "local"]
    assert status(board, "t1") == TaskState.QUEUED


def test_a_worker_silent_for_exactly_the_timeout_is_kept() -> None:
    board = board_with("w1")

    removed, effects = board.expire_silent(NOW + 30, timeout=30.0)
    assert (removed, effects.finished) == ([], [])


def test_touching_an_unknown_worker_is_rejected() -> None:
    with pytest.raises(Rejected) as caught:
        TaskBoard().touch("ghost", NOW)

    assert caught.value.code == ErrorCode.UNKNOWN_WORKER


@pytest.mark.parametrize("concurrency", [0, -1])
def test_a_worker_without_capacity_cannot_register(concurrency: int) -> None:
    board = TaskBoard()

    with pytest.raises(Rejected) as caught:
        board.register("w1", "host", concurrency, [ADD], NOW)

    assert caught.value.code == ErrorCode.INVALID_MESSAGE
    assert len(board.workers) == 0


def test_a_worker_with_an_invalid_signature_cannot_register() -> None:
    bad = TaskSignature(name="bad", params=[Param(name="not a name", kind="POSITIONAL_ONLY")])
    board = TaskBoard()

    with pytest.raises(Rejected) as caught:
        board.register("w1", "host", 1, [bad], NOW)

    assert caught.value.code == ErrorCode.INVALID_MESSAGE
    assert len(board.workers) == 0
    assert board.known_task_names() == []


def test_list_workers_describes_each_worker() -> None:
    board = board_with("w1")
    submit(board, "t1")
    assigned(board, "w1")

    [info] = board.list_workers(NOW + 2.5)

    assert (info.worker_id, info.name, info.concurrency, info.in_flight) == ("w1", "host-w1", 4, 1)
    assert (info.tasks, info.last_seen_ago, info.local) == (["add"], 2.5, False)


def test_a_task_a_lost_worker_never_started_does_not_count_against_redeliveries() -> None:
    board = board_with("w1", max_redeliveries=0)
    submit(board, "t1")
    assigned(board, "w1")  # buffered, never reported started

    assert board.remove_worker("w1", NOW + 1).finished == []

    record = board.record("t1", NOW + 1)
    assert record is not None
    assert (record.state, record.lost, record.returned) == (TaskState.QUEUED, 0, 1)


def test_a_task_that_kills_every_worker_before_it_starts_fails_after_max_returns() -> None:
    board = board_with("w1")
    submit(board, "t1")
    results = []
    for n in range(MAX_RETURNS + 1):
        board.register("w1", "host-w1", 4, [ADD], NOW + n)
        assert assigned(board, "w1") == ["t1"]
        results = board.remove_worker("w1", NOW + n).finished

    [result] = results
    assert result.status == TaskState.FAILURE
    assert result.error is not None
    assert result.error.reason == "worker_lost"


def crash(task_id: str) -> Outcome:
    """What a subworker reports when the child process running the task died under it."""
    error = TaskError(
        type="WorkerCrashed",
        reason=FailureReason.WORKER_CRASHED,
        message="the child process (pid 77) running the task died: signal SIGSEGV",
    )
    return Outcome(task_id=task_id, ok=False, error=error, started_at=NOW, finished_at=NOW)


def test_a_task_whose_child_process_crashed_goes_back_to_the_front_for_its_next_attempt() -> None:
    # Given t1 running on w1 (one slot) and t2 queued behind it
    board = board_with("w1", concurrency=1)
    submit(board, "t1", "t2")
    assert assigned(board, "w1") == ["t1"]
    board.report("w1", ["t1"], [], NOW)

    # When w1 reports that the child process running t1 died
    finished = board.report("w1", [], [crash("t1")], NOW + 1).finished

    # Then t1 is not final: it is queued ahead of t2 and delivered again as attempt 2
    assert finished == []
    assert status(board, "t1") == TaskState.QUEUED
    plan = board.dispatch(["w1"])[0]
    assert [(a.id, a.attempt) for a in plan["w1"]] == [("t1", 2)]
    # And the subworker itself is still registered and holding it
    assert [w.in_flight for w in board.list_workers(NOW + 1)] == [1]


def test_a_task_that_crashes_its_child_more_than_max_redeliveries_times_fails_as_crashed() -> None:
    board = board_with("w1", max_redeliveries=2)
    submit(board, "t1")
    results = []
    for n in range(3):
        assert assigned(board, "w1") == ["t1"]
        board.report("w1", ["t1"], [], NOW + n)
        results = board.report("w1", [], [crash("t1")], NOW + n + 0.5).finished
        assert (results == []) == (n < 2)

    [result] = results
    assert (result.status, result.attempts) == (TaskState.FAILURE, 3)
    assert result.error is not None
    assert (result.error.type, result.error.reason) == ("WorkerCrashed", "worker_crashed")
    assert result.error.message == (
        "the process running the task died 3 times; giving up after 2 redeliveries"
    )
    assert len(board) == 0


def test_a_task_that_raised_follows_its_retry_policy_not_the_redelivery_one() -> None:
    # Given a task allowed one retry, on a board allowing no redelivery
    board = TaskBoard(BoardConfig(max_redeliveries=0), entropy=counting(lambda low, high: high))
    board.register("w1", "host-w1", 4, [TaskSignature(name="flaky", max_retries=1)], NOW)
    board.submit([TaskSpec(name="flaky", id="t1")], Priority.NORMAL, NOW)
    raised = Outcome(
        task_id="t1",
        ok=False,
        error=TaskError(type="RuntimeError", message="boom", reason=FailureReason.EXCEPTION),
    )

    # When its first attempt raises, it waits its backoff to be retried
    assert assigned(board, "w1") == ["t1"]
    board.report("w1", ["t1"], [], NOW)
    assert board.report("w1", [], [raised], NOW + 1).finished == []
    assert status(board, "t1", NOW + 1) == TaskState.RETRYING
    assert board.release_due(NOW + 2).queued == 1

    # And when the retry raises too, it fails with its own error
    assert [a.attempt for a in board.dispatch(["w1"])[0]["w1"]] == [2]
    board.report("w1", ["t1"], [], NOW + 2)
    [result] = board.report("w1", [], [raised], NOW + 3).finished
    assert (result.status, result.attempts) == (TaskState.FAILURE, 2)
    assert result.error is not None
    assert (result.error.type, result.error.reason) == ("RuntimeError", "exception")


def test_a_crash_reported_without_a_started_notice_still_counts_against_max_redeliveries() -> None:
    board = board_with("w1", max_redeliveries=1)
    submit(board, "t1")
    results = []
    for n in range(2):
        assert assigned(board, "w1") == ["t1"]
        results = board.report(
            "w1", [], [crash("t1")], NOW + n
        ).finished  # its outcome says it started

    [result] = results
    assert result.error is not None
    assert result.error.reason == "worker_crashed"
