"""Replaying the journal's entries onto a new board: every task comes back in its state,
held ones in doubt until their subworkers say what they hold (then redelivered if none
does), results within their TTL kept, schedules resumed; a compacted snapshot replays to
the same board."""

from __future__ import annotations

from typing import Any

from recording_board import RecordingBoard

from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.board_view import BoardView
from fastworker_control_plane.core.handover import GRACE
from fastworker_control_plane.durability.entries import Recorder, Recovered, snapshot
from fastworker_control_plane.durability.schema import Entry
from fastworker_protocol import (
    Outcome,
    Param,
    Priority,
    TaskError,
    TaskSignature,
    TaskSpec,
    TaskState,
)

NOW = 1000.0
ADD = TaskSignature(
    name="add", params=[Param(name=p, kind="POSITIONAL_OR_KEYWORD") for p in ("x", "y")]
)
TICK = TaskSignature(name="tick", repeat_interval=60.0)


def new_board(**config: Any) -> RecordingBoard:
    board = RecordingBoard(BoardConfig(**config))
    board.learn_tasks([ADD])
    return board


def spec(task_id: str, **fields: Any) -> TaskSpec:
    return TaskSpec(name="add", id=task_id, args=[1, 2], **fields)


class Journaled:
    """A board whose transitions are recorded, as the engine does."""

    def __init__(self, **config: Any) -> None:
        self.board = new_board(**config)
        self.recorder = Recorder(BoardView(self.board))
        self.entries: list[Entry] = []

    def record(self) -> None:
        self.entries += self.recorder.entries(self.board.take().changes)

    def replayed(self, now: float, **config: Any) -> tuple[TaskBoard, int]:
        recovered = Recovered()
        for entry in self.entries:
            recovered.apply(entry)
        board = new_board(**config)
        return board, recovered.restore(board, now)


def test_every_task_comes_back_in_its_state() -> None:
    # Given tasks finished, held by a worker, running there, queued, and delayed
    j = Journaled()
    names = ["finished", "held", "running", "waiting"]
    j.board.submit([spec(name) for name in names], Priority.NORMAL, NOW)
    j.board.submit([spec("later", eta=NOW + 600)], Priority.HIGH, NOW)
    j.board.register("w", "w", 3, [ADD], NOW)
    assert len(j.board.dispatch(["w"])[0]["w"]) == 3  # all but "waiting"
    j.board.report("w", ["running"], [Outcome(task_id="finished", ok=True, result=3)], NOW)
    j.record()
    # When the journal is replayed onto a new board
    board, in_doubt = j.replayed(NOW + 5)
    # Then the finished task's result reads back, the held ones stay with their worker
    # for the grace, then (no worker claimed them) are queued again
    finished = board.get("finished", NOW + 5)
    assert finished is not None
    assert finished.status == TaskState.SUCCESS
    assert finished.result == 3
    assert in_doubt == 2
    held = board.record("held", NOW + 5)
    assert held is not None
    assert (held.state, held.worker_id) == (TaskState.ASSIGNED, "w")
    assert board.end_handover(NOW + 5 + GRACE - 0.1).queued == 0
    assert board.end_handover(NOW + 5 + GRACE).queued == 2
    # (the one it had started counts as redelivered, the one it had not as returned)
    for task_id, counts in (("held", (0, 1)), ("running", (1, 0))):
        record = board.record(task_id, NOW + 5)
        assert record is not None
        assert record.state == TaskState.QUEUED
        assert (record.lost, record.returned) == counts
    waiting = board.get("waiting", NOW + 5)
    assert waiting is not None
    assert waiting.status == TaskState.QUEUED
    later = board.get("later", NOW + 5)
    assert later is not None
    assert later.status == TaskState.SCHEDULED
    assert later.eta == NOW + 600
    assert len(board) == 4
    assert len(board.queues) == 3


def test_a_delayed_task_is_released_on_time_after_the_replay() -> None:
    j = Journaled()
    j.board.submit([spec("later", eta=NOW + 60)], Priority.NORMAL, NOW)
    j.record()
    board, _ = j.replayed(NOW + 1)
    assert board.release_due(NOW + 59).queued == 0
    assert board.release_due(NOW + 60).queued == 1


def test_a_retrying_task_is_queued_again_with_its_retries_counted() -> None:
    j = Journaled()
    j.board.submit([spec("flaky", max_retries=3)], Priority.NORMAL, NOW)
    j.board.register("w", "w", 1, [ADD], NOW)
    j.board.dispatch(["w"])
    failure = Outcome(task_id="flaky", ok=False, error=TaskError(type="ValueError", message="x"))
    j.board.report("w", [], [failure], NOW)
    j.record()
    board, _ = j.replayed(NOW + 1)
    record = board.record("flaky", NOW + 1)
    assert record is not None
    assert (record.state, record.retries, len(record.attempt_errors)) == (TaskState.QUEUED, 1, 1)


def test_a_task_held_too_often_fails_instead_of_running_forever() -> None:
    j = Journaled(max_redeliveries=0)
    j.board.submit([spec("held")], Priority.NORMAL, NOW)
    j.board.register("w", "w", 1, [ADD], NOW)
    j.board.dispatch(["w"])
    j.board.report("w", ["held"], [], NOW)
    j.record()
    board, _ = j.replayed(NOW + 1, max_redeliveries=0)
    board.end_handover(NOW + 1 + GRACE)
    result = board.get("held", NOW + 1)
    assert result is not None
    assert result.status == TaskState.FAILURE
    assert result.error is not None
    assert result.error.reason == "worker_lost"


def test_results_past_their_ttl_are_not_restored() -> None:
    j = Journaled(result_ttl=10)
    j.board.submit([spec("old")], Priority.NORMAL, NOW)
    j.board.cancel("old", NOW)
    j.record()
    board, _ = j.replayed(NOW + 9, result_ttl=10)
    assert board.get("old", NOW + 9) is not None
    board, _ = j.replayed(NOW + 11, result_ttl=10)
    assert board.get("old", NOW + 11) is None


def test_an_idempotency_key_still_names_its_task_after_the_replay() -> None:
    j = Journaled()
    [first] = j.board.submit([spec("", idempotency_key="order-7")], Priority.NORMAL, NOW)[0]
    j.record()
    board, _ = j.replayed(NOW + 1)
    assert board.submit([spec("", idempotency_key="order-7")], Priority.NORMAL, NOW + 1)[0] == [
        first
    ]
    assert len(board) == 1


def test_a_periodic_schedule_resumes_where_it_was() -> None:
    j = Journaled()
    j.board.learn_tasks([TICK])
    j.board.learn_schedules([TICK], NOW)
    j.board.release_due(NOW + 60)  # the first tick runs
    j.record()
    board, _ = j.replayed(NOW + 70)
    board.learn_tasks([TICK])
    board.learn_schedules([TICK], NOW + 70)
    [info] = board.schedules.infos()
    assert (info.times_run, info.next_run, info.running) == (1, NOW + 120, True)


def test_a_changed_schedule_starts_afresh() -> None:
    j = Journaled()
    j.board.learn_schedules([TICK], NOW)
    j.board.release_due(NOW + 60)
    j.record()
    board, _ = j.replayed(NOW + 70)
    hourly = TaskSignature(name="tick", repeat_interval=3600.0)
    board.learn_schedules([hourly], NOW + 70)
    [info] = board.schedules.infos()
    assert (info.times_run, info.next_run) == (0, NOW + 70 + 3600)


def test_a_snapshot_replays_to_the_same_tasks() -> None:
    j = Journaled()
    j.board.submit([spec("a"), spec("b"), spec("c", eta=NOW + 60)], Priority.NORMAL, NOW)
    j.board.register("w", "w", 1, [ADD], NOW)
    j.board.dispatch(["w"])
    j.board.report("w", [], [Outcome(task_id="a", ok=True, result=3)], NOW)
    j.record()
    original, _ = j.replayed(NOW + 1)
    compacted = Journaled()
    compacted.entries = snapshot(original, NOW + 1)
    again, redelivered = compacted.replayed(NOW + 2)
    assert redelivered == 0
    listed = [(r.task_id, r.status, r.result) for r in original.list_tasks(None, 10, NOW + 1)]
    assert [(r.task_id, r.status, r.result) for r in again.list_tasks(None, 10, NOW + 2)] == listed


def test_queue_order_survives_a_restart_redelivered_and_held_tasks_included() -> None:
    # Given "a" and "b" back at the front of the queue after their worker was lost, then
    # "a" held by a worker again when the control plane stops
    j = Journaled()
    j.board.register("w", "w", 2, [ADD], NOW)
    j.board.submit([spec(task_id) for task_id in ("a", "b", "q0", "q1")], Priority.NORMAL, NOW)
    assert [t.id for t in j.board.dispatch(["w"])[0]["w"]] == ["a", "b"]
    j.board.remove_worker("w", NOW + 1)
    j.board.register("w2", "w2", 1, [ADD], NOW + 1)
    assert [t.id for t in j.board.dispatch(["w2"])[0]["w2"]] == ["a"]
    j.record()

    # When the journal is replayed and one worker takes the queue a task at a time
    board, _ = j.replayed(NOW + 5)
    board.end_handover(NOW + 5 + GRACE)
    board.register("w", "w", 1, [ADD], NOW + 5)
    order: list[str] = []
    while assigned := board.dispatch(["w"])[0].get("w", []):
        order.append(assigned[0].id)
        board.report("w", [], [Outcome(task_id=order[-1], ok=True)], NOW + 5)

    # Then it comes out in the order it had
    assert order == ["a", "b", "q0", "q1"]


def test_a_task_finished_and_evicted_before_it_is_journaled_is_still_written_final() -> None:
    # Given a result cache of one, and three journaled tasks that all finish before their
    # transitions are recorded again
    j = Journaled(result_max_size=1)
    j.board.submit([spec("a"), spec("b"), spec("c")], Priority.NORMAL, NOW)
    j.record()
    j.board.register("w", "w", 3, [ADD], NOW)
    j.board.dispatch(["w"])
    outcomes = [Outcome(task_id=t, ok=True, result=3) for t in ("a", "b", "c")]
    j.board.report("w", [], outcomes, NOW)
    assert len(j.board.results) == 1  # "a" and "b" were evicted already
    # When the transitions are recorded and replayed
    j.record()
    board, _ = j.replayed(NOW + 1, result_max_size=1)
    # Then none of the three comes back to run again
    assert len(board) == 0
    assert len(board.queues) == 0


def _held_when_stopped() -> TaskBoard:
    """A replayed board whose worker "w" held "done" (finished, not yet reported),
    "busy" (running), "buffered" (not started) and "lost" (never reached it)."""
    j = Journaled()
    ids = ["done", "busy", "buffered", "lost"]
    j.board.submit([spec(task_id) for task_id in ids], Priority.NORMAL, NOW)
    j.board.register("w", "w", 4, [ADD], NOW)
    assert [t.id for t in j.board.dispatch(["w"])[0]["w"]] == ids
    j.board.report("w", ["done", "busy"], [], NOW)
    j.record()
    board, in_doubt = j.replayed(NOW + 5)
    assert in_doubt == 4
    return board


def test_a_worker_back_after_a_takeover_keeps_what_it_holds_and_only_the_rest_runs_again() -> None:
    # Given the board of a control plane that took over, "w" having held four tasks
    board = _held_when_stopped()
    # When "w" registers again, saying it holds all but "lost"
    board.register("w", "w", 4, [ADD], NOW + 6, holding=["busy", "buffered", "done"])
    # Then "lost" is queued at once (and goes to the next fetch), the others stay its own
    board.register("v", "v", 4, [ADD], NOW + 6)
    assert [t.id for t in board.dispatch(["v"])[0]["v"]] == ["lost"]
    # and the outcome it reports for "done" ends it: nothing of it runs twice
    board.report("w", [], [Outcome(task_id="done", ok=True, result=3)], NOW + 6)
    done = board.get("done", NOW + 6)
    assert done is not None
    assert (done.status, done.attempts) == (TaskState.SUCCESS, 1)
    # and the end of the grace redelivers nothing it kept
    assert board.end_handover(NOW + 5 + GRACE).queued == 0
    states = {t: r.state for t in ("busy", "buffered") if (r := board.record(t, NOW + 9))}
    assert states == {"busy": TaskState.RUNNING, "buffered": TaskState.ASSIGNED}


def test_a_worker_silent_on_what_it_holds_has_its_outcomes_taken_until_the_grace_ends() -> None:
    # Given the board of a control plane that took over, "w" having held four tasks
    board = _held_when_stopped()
    # When "w" registers again without saying what it holds, and reports "done"
    board.register("w", "w", 4, [ADD], NOW + 6)
    board.report("w", [], [Outcome(task_id="done", ok=True, result=3)], NOW + 6)
    # Then "done" ends with its outcome, and the rest is redelivered once the grace ends
    assert board.end_handover(NOW + 5 + GRACE).queued == 3
    done = board.get("done", NOW + 6)
    assert done is not None
    assert done.status == TaskState.SUCCESS
