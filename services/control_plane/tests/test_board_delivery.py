"""Dispatch never lets one worker's backlog delay another's work, never buffers slow tasks,
and takes back batches a worker never received."""

from __future__ import annotations

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.dispatch_policy import QUICK_RUN
from fastworker_control_plane.core.workers import LOST_AFTER_REQUESTS
from fastworker_protocol import Outcome, Param, Priority, TaskSignature, TaskSpec, TaskState

NOW = 1000.0


def sig(name: str) -> TaskSignature:
    return TaskSignature(name=name, params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])


HEAVY, LIGHT = sig("heavy"), sig("light")


def submit(board: TaskBoard, name: str, *ids: str, priority: Priority = Priority.NORMAL) -> None:
    board.submit([TaskSpec(name=name, id=i, args=[1]) for i in ids], priority, NOW)


def sent(board: TaskBoard, worker_id: str) -> list[str]:
    return [a.id for a in board.dispatch([worker_id])[0].get(worker_id, [])]


def test_a_backlog_of_any_size_for_a_busy_worker_does_not_delay_an_idle_workers_task() -> None:
    # Given a busy 1-slot worker for "heavy" with 20,000 heavy tasks queued before 5 light ones
    board = TaskBoard()
    board.register("busy", "b", 1, [HEAVY], NOW)
    board.register("idle", "i", 4, [LIGHT], NOW)
    submit(board, "heavy", *(f"h{n}" for n in range(20_000)))
    submit(board, "light", *(f"l{n}" for n in range(5)))
    assert sent(board, "busy") == ["h0"]

    # When the idle worker asks for work, Then it gets the light tasks at once
    assert sent(board, "idle") == ["l0", "l1", "l2", "l3"]


def test_the_oldest_task_a_worker_can_run_goes_first_across_names() -> None:
    board = TaskBoard()
    board.register("both", "b", 3, [HEAVY, LIGHT], NOW)
    submit(board, "light", "l1")
    submit(board, "heavy", "h1")
    submit(board, "light", "l2")
    submit(board, "heavy", "c1", priority=Priority.CRITICAL)

    assert sent(board, "both") == ["c1", "l1", "h1"]


def finish(board: TaskBoard, worker_id: str, task_id: str, ran: float) -> None:
    outcome = Outcome(task_id=task_id, ok=True, started_at=NOW, finished_at=NOW + ran)
    board.report(worker_id, [], [outcome], NOW)


def test_only_tasks_measured_as_quick_wait_in_a_prefetch_buffer() -> None:
    # Given a 1-slot worker asking for a buffer of 10
    board = TaskBoard()
    board.register("w", "w", 1, [HEAVY, LIGHT], NOW)
    board.workers.get("w").set_prefetch(10)  # type: ignore[union-attr]
    submit(board, "heavy", "h1", "h2", "h3")
    # When nothing is measured yet, Then only its one slot is filled
    assert sent(board, "w") == ["h1"]
    # When heavy tasks prove slow, Then they still go only into free slots
    finish(board, "w", "h1", ran=5.0)
    assert sent(board, "w") == ["h2"]
    # And quick tasks fill the buffer
    submit(board, "light", "l0")
    finish(board, "w", "h2", ran=5.0)
    assert sent(board, "w") == ["h3"]
    finish(board, "w", "h3", ran=5.0)
    assert sent(board, "w") == ["l0"]
    finish(board, "w", "l0", ran=QUICK_RUN / 10)
    submit(board, "light", *(f"l{n}" for n in range(1, 20)))
    assert len(sent(board, "w")) == 11


def confirming_board() -> TaskBoard:
    board = TaskBoard()
    board.register("w", "w", 2, [LIGHT], NOW, confirms=True)
    return board


def test_a_batch_the_worker_confirms_stays_with_it() -> None:
    board = confirming_board()
    submit(board, "light", "a", "b")
    delivery = board.deliver("w", board.dispatch(["w"])[0]["w"])
    assert delivery.batch > 0

    for _ in range(LOST_AFTER_REQUESTS + 2):
        board.heard("w", [delivery.batch] if _ == 0 else [], NOW + 1)

    assert [board.get(t, NOW).status for t in "ab"] == [TaskState.ASSIGNED] * 2  # type: ignore[union-attr]


def test_a_batch_never_confirmed_comes_back_to_the_front_uncounted() -> None:
    # Given a batch sent into a fetch the worker had given up on, and a task queued since
    board = confirming_board()
    submit(board, "light", "a", "b")
    delivery = board.deliver("w", board.dispatch(["w"])[0]["w"])
    submit(board, "light", "later")

    # When the worker's next requests never confirm it
    for _ in range(LOST_AFTER_REQUESTS - 1):
        board.heard("w", [], NOW + 1)
    assert board.get("a", NOW).status == TaskState.ASSIGNED  # type: ignore[union-attr]
    board.heard("w", [], NOW + 1)

    # Then its tasks are queued again, in order, ahead of newer ones, and nothing counts
    assert delivery.batch > 0
    for task_id in "ab":
        record = board.record(task_id, NOW)
        assert record is not None
        assert (record.state, record.attempts, record.lost, record.returned) == (
            TaskState.QUEUED,
            0,
            0,
            0,
        )
    assert sent(board, "w") == ["a", "b"]


def test_a_worker_that_does_not_confirm_gets_no_batch_numbers() -> None:
    board = TaskBoard()
    board.register("w", "w", 2, [LIGHT], NOW)
    submit(board, "light", "a")

    assert board.deliver("w", board.dispatch(["w"])[0]["w"]).batch == 0


def test_a_running_task_silent_past_its_time_limit_fails_as_timeout_and_is_stopped() -> None:
    # Given a task with a 2 s limit that its worker reported started, then went quiet on
    board = TaskBoard()
    board.register("w", "w", 1, [LIGHT], NOW)
    board.submit([TaskSpec(name="light", id="t", args=[1], time_limit=2.0)], Priority.NORMAL, NOW)
    assert sent(board, "w") == ["t"]
    board.report("w", ["t"], [], NOW)

    # When the margin past its limit has not run out, Then it keeps running
    assert board.time_out_overdue(NOW + 2 + 10, margin=10).finished == []
    # When it has, Then it fails with reason timeout and its worker is told to stop it
    effects = board.time_out_overdue(NOW + 2 + 10.5, margin=10)
    [result] = effects.finished
    assert result.status == TaskState.FAILURE
    assert result.error is not None
    assert result.error.reason == "timeout"
    assert effects.superseded == [("w", "t")]
