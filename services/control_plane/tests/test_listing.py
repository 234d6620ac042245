"""Task listings fit their reply: large results are truncated, and listing stops, saying
so, before the reply would pass the message size limit."""

from __future__ import annotations

import msgspec
import pytest

from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.listing import (
    KEPT_CHARS,
    LISTED_TASK_MAX_BYTES,
    fit,
    listed_form,
)
from fastworker_protocol import (
    Codec,
    Outcome,
    Param,
    Priority,
    TaskError,
    TaskList,
    TaskResult,
    TaskSignature,
    TaskSpec,
    TaskState,
)

NOW = 1000.0
MB = 1_000_000
TEXT_OF = TaskSignature(name="text_of", params=[Param(name="n", kind="POSITIONAL_OR_KEYWORD")])


def size(result: TaskResult) -> int:
    return len(msgspec.msgpack.encode(result))


def done(task_id: str, result: object = None, error: TaskError | None = None) -> TaskResult:
    status = TaskState.FAILURE if error else TaskState.SUCCESS
    return TaskResult(task_id=task_id, name="t", status=status, result=result, error=error)


def test_a_small_task_is_listed_as_it_is() -> None:
    result = done("a", result={"sum": 3})

    assert listed_form(result) == (result, size(result))


def test_a_task_with_a_large_result_is_listed_without_it_and_marked_truncated() -> None:
    result = done("a", result="x" * (LISTED_TASK_MAX_BYTES + 1))

    listed, listed_size = listed_form(result)

    assert (listed.task_id, listed.status, listed.result, listed.truncated) == (
        "a",
        TaskState.SUCCESS,
        None,
        True,
    )
    assert listed_size == size(listed) < 200


def test_a_long_traceback_keeps_its_end_and_a_long_message_its_beginning() -> None:
    traceback = "Traceback (most recent call last):\n" + "  frame\n" * 20_000 + "ValueError: x"
    message = "m" * 5000 + "END"
    error = TaskError(type="ValueError", message=message, traceback=traceback)
    result = msgspec.structs.replace(done("a", error=error), attempt_errors=[error, error])

    listed, listed_size = listed_form(result)

    assert listed.truncated
    assert listed.error is not None
    assert listed.error.traceback.endswith("ValueError: x")
    assert listed.error.traceback.startswith(f"[{len(traceback) - KEPT_CHARS} characters cut]\n")
    assert listed.error.message.startswith("m" * KEPT_CHARS)
    assert listed.error.message.endswith(" [3003 characters cut]")
    assert listed.attempt_errors == [listed.error, listed.error]
    assert listed_size <= LISTED_TASK_MAX_BYTES


def test_hundreds_of_attempt_errors_are_left_out_when_cutting_them_is_not_enough() -> None:
    error = TaskError(type="E", message="m" * 3000, traceback="t" * 3000)
    result = msgspec.structs.replace(done("a", error=error), attempt_errors=[error] * 100)

    listed, listed_size = listed_form(result)

    assert (listed.truncated, listed.attempt_errors) == (True, [])
    assert listed.error is not None
    assert listed_size <= LISTED_TASK_MAX_BYTES


def test_listing_stops_before_the_budget_and_says_there_is_more() -> None:
    results = [done(f"t{i}", result="x" * 1000) for i in range(10)]
    each = size(results[0])

    listing = fit(results, limit=10, budget=3 * each + each // 2)

    assert [r.task_id for r in listing.tasks] == ["t0", "t1", "t2"]
    assert listing.more is True


def test_a_listing_cut_by_its_limit_alone_has_no_more() -> None:
    results = [done(f"t{i}") for i in range(10)]

    listing = fit(results, limit=4, budget=MB)

    assert (len(listing.tasks), listing.more) == (4, False)
    assert fit(results, limit=0, budget=MB).tasks == []
    assert fit(results, limit=-3, budget=MB).tasks == []


@pytest.mark.parametrize("max_message_size", [1024 * 1024, 16 * 1024 * 1024])
def test_a_board_with_large_results_still_lists_them_in_one_message(
    max_message_size: int,
) -> None:
    # Given finished tasks whose results together are several times the message limit
    board = TaskBoard(BoardConfig(max_message_size=max_message_size))
    board.register("w", "w", 100, [TEXT_OF], NOW)
    big = max_message_size * 6 // 10  # two of them do not fit one message
    for i in range(5):
        board.submit([TaskSpec(name="text_of", id=f"t{i}", args=[big])], Priority.NORMAL, NOW)
        assert board.dispatch(["w"])[0]
        board.report("w", [], [Outcome(task_id=f"t{i}", ok=True, result="x" * big)], NOW + i)

    # When they are listed
    listing = board.task_listing(None, 10_000, NOW + 10)

    # Then every one is listed, truncated, and the reply fits the limit
    assert [r.task_id for r in listing.tasks] == ["t4", "t3", "t2", "t1", "t0"]
    assert all(r.truncated and r.result is None for r in listing.tasks)
    assert listing.more is False
    reply = Codec(max_message_size).encode(TaskList(tasks=listing.tasks, more=listing.more))
    assert len(reply) <= max_message_size
    whole = board.get("t0", NOW + 10)  # a get still returns the result whole
    assert whole is not None
    assert (whole.result, whole.truncated) == ("x" * big, False)


def test_a_board_with_more_tasks_than_one_message_holds_lists_what_fits() -> None:
    max_message_size = 64 * 1024
    board = TaskBoard(BoardConfig(max_message_size=max_message_size))
    board.register("w", "w", 1000, [TEXT_OF], NOW)
    for i in range(500):  # each listed task takes about 250 bytes: not all fit 64 KiB
        board.submit([TaskSpec(name="text_of", id=f"t{i:03}", args=[1])], Priority.NORMAL, NOW)

    listing = board.task_listing(None, 10_000, NOW)

    assert 100 < len(listing.tasks) < 500
    assert listing.more is True
    assert listing.tasks[0].task_id == "t499"  # the newest first, as ever
    reply = Codec(max_message_size).encode(TaskList(tasks=listing.tasks, more=listing.more))
    assert len(reply) <= max_message_size
