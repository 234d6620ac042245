"""Tasks that fail for good become dead letters, with their arguments, whatever failed
them; cancelled ones do not. Listing them fits a reply; retrying queues new tasks linked
to the old ones through the board's admission; purging drops them. Results are kept for
their task's own ``result_ttl``."""

from __future__ import annotations

from typing import Any

import pytest

from fastworker_control_plane.core import dead_letter_ops
from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.entropy import counting
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import (
    MAX_FAILED_ACTED,
    ErrorCode,
    FailedFilter,
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
ECHO = TaskSignature(name="echo", params=[Param(name="value", kind="POSITIONAL_OR_KEYWORD")])
FLAKY = TaskSignature(
    name="flaky", params=[Param(name="value", kind="POSITIONAL_OR_KEYWORD")], max_retries=1
)
ONE = [Param(name="value", kind="POSITIONAL_OR_KEYWORD")]
BOOM = TaskError(type="ValueError", message="boom", traceback="Traceback...\nValueError: boom")


def board_with(*signatures: TaskSignature, **config: Any) -> TaskBoard:
    board = TaskBoard(BoardConfig(**config), entropy=counting(lambda low, high: low))
    board.register("w", "w", 100, [ECHO, FLAKY, *signatures], NOW)
    return board


def fail(board: TaskBoard, task_id: str, name: str = "echo", value: object = 1) -> None:
    """Submit ``name(value)`` and fail every attempt until it is final."""
    board.submit([TaskSpec(name=name, id=task_id, args=[value])], Priority.HIGH, NOW)
    now = NOW
    while (record := board.record(task_id, now, count=False)) and not record.state.is_final:
        board.release_due(now)
        board.dispatch(["w"], now)
        board.report("w", [], [Outcome(task_id=task_id, ok=False, error=BOOM)], now)
        now += 700


def letters(board: TaskBoard, **selection: Any) -> list[str]:
    listed = dead_letter_ops.listing(board, FailedFilter(**selection), 100, NOW + 10_000)
    return [letter.task_id for letter in listed.tasks]


def test_a_task_failed_after_its_retries_is_kept_with_its_arguments_and_traceback() -> None:
    board = board_with()

    fail(board, "t", "flaky", b"payload")

    listed = dead_letter_ops.listing(board, FailedFilter(), 10, NOW + 2000)
    assert (listed.total, listed.stored, listed.more) == (1, 1, False)
    [letter] = listed.tasks
    assert (letter.task_id, letter.name, letter.args, letter.priority) == (
        "t",
        "flaky",
        [b"payload"],
        Priority.HIGH,
    )
    assert letter.attempts == 2
    assert letter.error is not None
    assert "ValueError: boom" in letter.error.traceback
    assert [e.message for e in letter.attempt_errors] == ["boom", "boom"]
    assert letter.failed_at == NOW + 700
    # while the result cache let go of the arguments, as always
    record = board.record("t", NOW + 700, count=False)
    assert record is not None
    assert record.args == []


def test_a_task_retried_then_succeeding_is_no_dead_letter() -> None:
    board = board_with()
    board.submit([TaskSpec(name="flaky", id="t", args=[1])], Priority.NORMAL, NOW)
    board.dispatch(["w"], NOW)
    board.report("w", [], [Outcome(task_id="t", ok=False, error=BOOM)], NOW)
    board.release_due(NOW + 5)
    board.dispatch(["w"], NOW + 5)
    board.report("w", [], [Outcome(task_id="t", ok=True, result=2)], NOW + 5)

    assert len(board.dead_letters) == 0


def test_a_lost_subworker_makes_a_dead_letter_but_a_cancel_does_not() -> None:
    board = board_with(max_redeliveries=0)
    board.submit([TaskSpec(name="echo", id=n, args=[n]) for n in "abc"], Priority.NORMAL, NOW)
    board.dispatch(["w"], NOW)
    board.report("w", ["a"], [], NOW)
    board.cancel("c", NOW)

    board.remove_worker("w", NOW + 1)  # "a" ran: lost once is too often here

    [letter] = dead_letter_ops.listing(board, FailedFilter(), 10, NOW + 1).tasks
    assert letter.task_id == "a"
    assert letter.error is not None
    assert letter.error.reason == FailureReason.WORKER_LOST


def test_a_task_silent_past_its_time_limit_becomes_a_dead_letter() -> None:
    board = board_with()
    board.submit([TaskSpec(name="echo", id="t", args=[1], time_limit=5.0)], Priority.NORMAL, NOW)
    board.dispatch(["w"], NOW)
    board.report("w", ["t"], [], NOW)

    board.time_out_overdue(NOW + 16, margin=10.0)

    [letter] = dead_letter_ops.listing(board, FailedFilter(), 10, NOW + 16).tasks
    assert (letter.task_id, letter.args) == ("t", [1])
    assert letter.error is not None
    assert letter.error.reason == FailureReason.TIMEOUT


def test_listing_cuts_large_letters_and_stops_before_the_reply_would_be_too_large() -> None:
    board = board_with(max_message_size=300_000)
    for n in range(5):
        fail(board, f"t{n}", value=b"x" * 100_000)

    listed = dead_letter_ops.listing(board, FailedFilter(), 100, NOW)

    assert [letter.truncated for letter in listed.tasks] == [True] * 5
    assert [letter.args for letter in listed.tasks] == [[]] * 5
    assert (listed.total, listed.more) == (5, False)


def test_a_listing_stops_with_more_when_even_cut_letters_do_not_fit() -> None:
    board = board_with(max_message_size=2_000)
    for n in range(30):
        fail(board, f"t{n}")

    listed = dead_letter_ops.listing(board, FailedFilter(), 100, NOW)

    assert listed.more
    assert 0 < len(listed.tasks) < 30
    assert listed.total == 30


def test_a_retry_queues_a_new_task_with_the_same_arguments_linked_to_the_letter() -> None:
    board = board_with()
    fail(board, "t", value={"customer": 7})

    retried = dead_letter_ops.retry(board, FailedFilter(task_ids=["t", "nope"]), False, NOW + 5)[0]

    [one] = retried.retried
    assert one.task_id == "t"
    assert (retried.missing, retried.more) == (["nope"], False)
    record = board.record(one.new_task_id, NOW + 5, count=False)
    assert record is not None
    assert (record.name, record.args, record.priority, record.state) == (
        "echo",
        [{"customer": 7}],
        Priority.HIGH,
        TaskState.QUEUED,
    )
    snapshot = board.get(one.new_task_id, NOW + 5)
    assert snapshot is not None
    assert snapshot.retry_of == "t"
    assert len(board.dead_letters) == 0
    again = dead_letter_ops.retry(board, FailedFilter(task_ids=["t"]), False, NOW + 6)[0]
    assert (again.retried, again.missing) == ([], ["t"])


def test_a_retried_task_failing_again_is_a_new_letter_naming_the_old_one() -> None:
    board = board_with()
    fail(board, "t")
    [one] = dead_letter_ops.retry(board, FailedFilter(task_ids=["t"]), False, NOW)[0].retried

    board.dispatch(["w"], NOW)
    board.report("w", [], [Outcome(task_id=one.new_task_id, ok=False, error=BOOM)], NOW)

    [letter] = dead_letter_ops.listing(board, FailedFilter(), 10, NOW).tasks
    assert (letter.task_id, letter.retry_of) == (one.new_task_id, "t")


def test_a_retry_or_purge_naming_nothing_is_refused() -> None:
    board = board_with()
    fail(board, "t")

    for act in (dead_letter_ops.retry, dead_letter_ops.purge):
        with pytest.raises(Rejected, match="all_matching") as refused:
            act(board, FailedFilter(task_name="echo"), False, NOW)
        assert refused.value.code == ErrorCode.INVALID_MESSAGE
    assert len(board.dead_letters) == 1


def test_a_retry_into_a_full_queue_is_refused_and_the_letters_stay() -> None:
    board = board_with(max_queued=2)
    for n in range(3):
        fail(board, f"t{n}")
    board.submit([TaskSpec(name="echo", args=[1])], Priority.HIGH, NOW)

    with pytest.raises(Rejected, match="nothing was retried") as refused:
        dead_letter_ops.retry(board, FailedFilter(), True, NOW)

    assert refused.value.code == ErrorCode.QUEUE_FULL
    assert refused.value.detail == {"priority": "high", "live": 1, "bound": 2}
    assert len(board.dead_letters) == 3
    assert len(board) == 1


def test_a_retry_of_a_task_no_longer_registered_names_the_letter() -> None:
    board = board_with(TaskSignature(name="gone", params=ONE))
    fail(board, "t", "gone", 1)
    board.catalog.checkers.pop("gone")

    with pytest.raises(Rejected, match="dead letter t cannot run again") as refused:
        dead_letter_ops.retry(board, FailedFilter(task_ids=["t"]), False, NOW)

    assert refused.value.code == ErrorCode.UNKNOWN_TASK
    assert len(board.dead_letters) == 1


def test_a_bulk_retry_takes_the_oldest_first_and_says_when_more_are_left() -> None:
    board = board_with()
    total = MAX_FAILED_ACTED + 5
    for n in range(total):
        fail(board, f"t{n:05}")

    first = dead_letter_ops.retry(board, FailedFilter(), True, NOW)[0]
    second = dead_letter_ops.retry(board, FailedFilter(), True, NOW)[0]

    assert (len(first.retried), first.more) == (MAX_FAILED_ACTED, True)
    assert first.retried[0].task_id == "t00000"
    assert (len(second.retried), second.more) == (5, False)
    assert len(board.dead_letters) == 0
    assert len(board) == total


def test_a_purge_drops_what_matches() -> None:
    board = board_with()
    fail(board, "a")
    fail(board, "b", "flaky")

    purged = dead_letter_ops.purge(board, FailedFilter(task_name="flaky"), True, NOW)[0]
    assert (purged.purged, purged.missing) == (1, [])
    assert letters(board) == ["a"]

    purged = dead_letter_ops.purge(board, FailedFilter(task_ids=["a", "b"]), False, NOW)[0]
    assert (purged.purged, purged.missing) == (1, ["b"])
    assert letters(board) == []


def test_a_task_with_its_own_result_ttl_keeps_its_result_that_long() -> None:
    board = board_with(
        TaskSignature(name="brief", result_ttl=5.0),
        TaskSignature(name="secret", result_ttl=0.0),
        result_ttl=3600.0,
    )
    board.submit([TaskSpec(name=n, id=n) for n in ("brief", "secret")], Priority.NORMAL, NOW)
    board.submit([TaskSpec(name="echo", id="plain", args=[1])], Priority.NORMAL, NOW)
    board.dispatch(["w"], NOW)

    finished = board.report(
        "w", [], [Outcome(task_id=n, ok=True, result=n) for n in ("brief", "secret", "plain")], NOW
    ).finished

    assert [r.result for r in finished] == ["brief", "secret", "plain"]  # waiters get them
    assert board.get("secret", NOW) is None  # 0: never kept
    assert board.get("brief", NOW + 4.9) is not None
    assert board.get("brief", NOW + 5) is None
    assert board.get("plain", NOW + 3599) is not None


def test_a_failed_task_with_no_result_ttl_is_still_a_dead_letter() -> None:
    board = board_with(TaskSignature(name="secret", params=ONE, result_ttl=0.0))

    fail(board, "t", "secret", 1)

    assert board.get("t", NOW) is None
    assert letters(board) == ["t"]
