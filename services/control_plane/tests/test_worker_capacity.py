"""A worker's capacity, prefetch and in-flight count (PROTOCOL.md §7, "Capacity, prefetch
and in-flight"): what ``list_workers`` reports is what dispatch measures room against."""

from __future__ import annotations

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.workers import WorkerSlot
from fastworker_protocol import Outcome, Param, Priority, TaskError, TaskSignature, TaskSpec

NOW = 1000.0
ECHO = TaskSignature(name="echo", params=[Param(name="value", kind="POSITIONAL_OR_KEYWORD")])
IDS = [f"t{n}" for n in range(5)]


def board_with_queued() -> TaskBoard:
    board = TaskBoard()
    board.register("w", "w", 1, [ECHO], NOW)
    board.submit([TaskSpec(name="echo", id=i, args=[1]) for i in IDS], Priority.NORMAL, NOW)
    return board


def slot(board: TaskBoard) -> WorkerSlot:
    found = board.workers.get("w")
    assert found is not None
    return found


def sent(board: TaskBoard) -> list[str]:
    return [a.id for a in board.dispatch(["w"], NOW)[0].get("w", [])]


def in_flight(board: TaskBoard) -> int:
    (info,) = board.list_workers(NOW)
    return info.in_flight


def quick(task_id: str) -> Outcome:
    return Outcome(task_id=task_id, ok=True, started_at=NOW, finished_at=NOW + 0.001)


def test_raising_prefetch_while_the_slots_are_busy_gives_nothing_until_the_name_is_quick() -> None:
    board = board_with_queued()
    assert sent(board) == ["t0"]
    slot(board).set_prefetch(3)
    assert sent(board) == []  # the buffer takes only names measured as quick
    board.report("w", [], [quick("t0")], NOW)
    assert sent(board) == ["t1", "t2", "t3", "t4"]  # capacity 1 + 3, nothing in flight


def test_in_flight_counts_assigned_running_and_cancelled_tasks_until_their_outcome() -> None:
    board = board_with_queued()
    slot(board).set_prefetch(3)
    assert sent(board) == ["t0"]
    board.report("w", [], [quick("t0")], NOW)
    assert sent(board) == IDS[1:]
    assert in_flight(board) == 4
    board.report("w", ["t1", "t2"], [], NOW)  # running
    assert in_flight(board) == 4
    board.cancel("t4", NOW)
    assert in_flight(board) == 4 == len(slot(board).in_flight)
    cancelled = TaskError(type="Cancelled", message="", reason="cancelled")
    board.report("w", [], [Outcome(task_id="t4", ok=False, error=cancelled)], NOW)
    board.report("w", [], [quick("t1")], NOW)
    assert in_flight(board) == 2
    assert sent(board) == []  # nothing left queued; the room is there
