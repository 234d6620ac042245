"""What the board keeps of a finished task: its result, counted in bytes against
``result_max_bytes``, and its arguments only when ``result_keep_arguments`` says so."""

from __future__ import annotations

from typing import Any

import msgspec

from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.durability.entries import Recovered, snapshot
from fastworker_control_plane.durability.schema import Done
from fastworker_protocol import Outcome, Param, Priority, TaskSignature, TaskSpec, TaskState

NOW = 1000.0
ECHO = TaskSignature(name="echo", params=[Param(name="value", kind="POSITIONAL_OR_KEYWORD")])
MB = 1_000_000


def board_with(**config: Any) -> TaskBoard:
    board = TaskBoard(BoardConfig(**config))
    board.register("w", "w", 100, [ECHO], NOW)
    return board


def run(board: TaskBoard, task_id: str, argument: object, result: object = None) -> None:
    """Submit ``echo(argument)`` and have the worker finish it with ``result``."""
    board.submit([TaskSpec(name="echo", id=task_id, args=[argument])], Priority.NORMAL, NOW)
    assert board.dispatch(["w"])[0]
    board.report("w", [], [Outcome(task_id=task_id, ok=True, result=result)], NOW)


def test_a_finished_task_lets_go_of_its_arguments_by_default() -> None:
    board = board_with()

    run(board, "big", b"x" * MB, result=1)

    record = board.record("big", NOW, count=False)
    assert record is not None
    assert (record.state, record.args, record.kwargs) == (TaskState.SUCCESS, [], {})
    assert record.arguments_kept is False
    assert board.results.bytes < 1000  # the megabyte is not counted: it is gone
    result = board.get("big", NOW)
    assert result is not None
    assert result.result == 1


def test_a_board_told_to_keep_arguments_keeps_them_and_counts_them() -> None:
    board = board_with(result_keep_arguments=True)

    run(board, "big", b"x" * MB)

    record = board.record("big", NOW, count=False)
    assert record is not None
    assert (record.args, record.arguments_kept) == ([b"x" * MB], True)
    assert MB < board.results.bytes < MB + 1000


def test_a_live_task_keeps_its_arguments_until_it_is_final() -> None:
    board = board_with()
    board.submit([TaskSpec(name="echo", id="t", args=[7])], Priority.NORMAL, NOW)
    assert board.dispatch(["w"])[0]

    record = board.record("t", NOW, count=False)

    assert record is not None
    assert (record.state, record.args, record.arguments_kept) == (TaskState.ASSIGNED, [7], True)


def test_a_cancelled_task_lets_go_of_its_arguments_too() -> None:
    board = board_with()
    board.submit([TaskSpec(name="echo", id="t", args=[b"x" * MB])], Priority.NORMAL, NOW)

    board.cancel("t", NOW)

    record = board.record("t", NOW, count=False)
    assert record is not None
    assert (record.state, record.args, record.arguments_kept) == (TaskState.CANCELLED, [], False)


def test_large_results_push_old_ones_out_by_bytes_before_the_entry_bound() -> None:
    # Given room for 10,000 results but only 3.5 MB of them
    board = board_with(result_max_bytes=3_500_000)

    # When five tasks return a megabyte each
    for i in range(5):
        run(board, f"t{i}", i, result=b"r" * MB)

    # Then only the three newest are kept, and the bytes stay under the bound
    assert [t for t in ("t0", "t1", "t2", "t3", "t4") if t in board.results] == ["t2", "t3", "t4"]
    assert 3 * MB < board.results.bytes <= 3_500_000
    assert board.results.stats.evictions == 2
    assert board.get("t0", NOW) is None


def test_an_evicted_results_id_is_free_again() -> None:
    board = board_with(result_max_bytes=1_500_000)
    run(board, "first", 1, result=b"r" * MB)
    run(board, "second", 2, result=b"r" * MB)  # pushes "first" out

    ids = board.submit([TaskSpec(name="echo", id="first", args=[1])], Priority.NORMAL, NOW)[0]

    assert ids == ["first"]
    again = board.get("first", NOW)
    assert again is not None
    assert again.status == TaskState.QUEUED


def test_a_journaled_result_comes_back_without_arguments_and_is_never_run_again() -> None:
    # Given a finished task whose arguments were dropped, written as a compacted journal
    board = board_with()
    run(board, "done", b"x" * MB, result=5)
    entries = snapshot(board, NOW)
    assert [type(e) for e in entries] == [Done]
    written = msgspec.msgpack.encode(entries[0])
    assert len(written) < 1000  # the journal does not carry the megabyte either

    # When it is replayed onto a new board
    recovered = Recovered()
    recovered.apply(msgspec.msgpack.decode(written, type=Done))
    again = board_with()
    recovered.restore(again, NOW + 1)

    # Then the result reads back, says its arguments are gone, and nothing is queued
    record = again.record("done", NOW + 1, count=False)
    assert record is not None
    assert (record.state, record.result, record.arguments_kept) == (TaskState.SUCCESS, 5, False)
    assert len(again) == 0
    assert again.results.bytes == board.results.bytes


def test_a_result_journaled_with_its_arguments_drops_them_when_restored() -> None:
    # (a journal written by a control plane that kept arguments, or by an older version)
    kept = board_with(result_keep_arguments=True)
    run(kept, "done", b"x" * MB, result=5)
    recovered = Recovered()
    for entry in snapshot(kept, NOW):
        recovered.apply(entry)

    board = board_with()
    recovered.restore(board, NOW + 1)

    record = board.record("done", NOW + 1, count=False)
    assert record is not None
    assert (record.args, record.arguments_kept) == ([], False)
    assert board.results.bytes < 1000
