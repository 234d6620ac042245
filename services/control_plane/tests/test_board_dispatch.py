"""TaskBoard dispatch: most urgent task first, to the least-loaded ready worker that runs it."""

from __future__ import annotations

from typing import Any

from fastworker_control_plane.core.board import TaskBoard
from fastworker_protocol import Assignment, Param, Priority, TaskSignature, TaskSpec, TaskState

NOW = 1000.0


def sig(name: str, *params: str) -> TaskSignature:
    return TaskSignature(
        name=name, params=[Param(name=p, kind="POSITIONAL_OR_KEYWORD") for p in params]
    )


ADD = sig("add", "x", "y")
MUL = sig("mul", "x", "y")


def spec(task_id: str, name: str = "add", *args: Any) -> TaskSpec:
    return TaskSpec(name=name, id=task_id, args=list(args or (1, 2)))


def ids(plan: dict[str, list[Assignment]]) -> dict[str, list[str]]:
    return {worker: [a.id for a in tasks] for worker, tasks in plan.items()}


def board_with(*workers: tuple[str, int], tasks: tuple[TaskSignature, ...] = (ADD,)) -> TaskBoard:
    board = TaskBoard()
    for worker_id, concurrency in workers:
        board.register(worker_id, f"host-{worker_id}", concurrency, tasks, NOW)
    return board


def test_the_highest_priority_task_is_dispatched_first() -> None:
    board = board_with(("w1", 1))
    board.submit([spec("low")], Priority.LOW, NOW)
    board.submit([spec("normal")], Priority.NORMAL, NOW + 1)
    board.submit([spec("critical")], Priority.CRITICAL, NOW + 2)

    assert ids(board.dispatch(["w1"])[0]) == {"w1": ["critical"]}
    assert board.queues.depth(Priority.LOW) == 1
    assert board.queues.depth(Priority.NORMAL) == 1


def test_an_assignment_carries_the_task_and_marks_it_assigned() -> None:
    board = board_with(("w1", 1))
    board.submit([TaskSpec(name="add", id="t1", args=[1], kwargs={"y": 2})], Priority.NORMAL, NOW)

    plan = board.dispatch(["w1"])[0]

    assert plan == {
        "w1": [
            Assignment(
                id="t1", name="add", args=[1], kwargs={"y": 2}, attempt=1, priority=Priority.NORMAL
            )
        ]
    }
    result = board.get("t1", NOW)
    assert result is not None
    assert (result.status, result.worker_id, result.attempts) == (TaskState.ASSIGNED, "w1", 1)


def test_a_task_goes_to_the_ready_worker_with_the_fewest_tasks_in_flight() -> None:
    board = board_with(("w1", 4), ("w2", 4))
    board.submit([spec("t1")], Priority.NORMAL, NOW)
    assert ids(board.dispatch(["w1"])[0]) == {"w1": ["t1"]}

    board.submit([spec("t2")], Priority.NORMAL, NOW + 1)

    assert ids(board.dispatch(["w1", "w2"])[0]) == {"w2": ["t2"]}


def test_equal_workers_share_a_burst_evenly() -> None:
    board = board_with(("w1", 2), ("w2", 2))
    board.submit([spec(f"t{i}") for i in range(4)], Priority.NORMAL, NOW)

    plan = ids(board.dispatch(["w2", "w1"])[0])

    assert plan == {"w1": ["t0", "t2"], "w2": ["t1", "t3"]}


def test_a_worker_is_never_given_more_than_its_concurrency() -> None:
    board = board_with(("w1", 2))
    board.submit([spec(f"t{i}") for i in range(5)], Priority.NORMAL, NOW)

    first = ids(board.dispatch(["w1"])[0])
    second = board.dispatch(["w1"])[0]

    assert first == {"w1": ["t0", "t1"]}
    assert second == {}
    assert len(board.queues) == 3
    assert [r.status for r in board.list_tasks(TaskState.QUEUED, 10, NOW)] == [TaskState.QUEUED] * 3


def test_only_workers_that_registered_a_task_name_are_given_it_and_others_wait_in_order() -> None:
    board = board_with(("adder", 4))
    board.learn_tasks([MUL])
    board.submit(
        [spec("m1", "mul"), spec("a1"), spec("m2", "mul"), spec("a2")], Priority.NORMAL, NOW
    )

    assert ids(board.dispatch(["adder"])[0]) == {"adder": ["a1", "a2"]}
    assert len(board.queues) == 2

    board.register("multiplier", "host-m", 1, [MUL], NOW + 1)
    assert ids(board.dispatch(["multiplier"])[0]) == {"multiplier": ["m1"]}
    assert ids(board.dispatch(["multiplier"])[0]) == {}


def test_a_skipped_task_keeps_its_place_ahead_of_later_tasks_of_its_priority() -> None:
    board = board_with(("adder", 1))
    board.learn_tasks([MUL])
    board.submit([spec("m1", "mul"), spec("a1"), spec("a2")], Priority.NORMAL, NOW)
    board.dispatch(["adder"])

    board.register("both", "host-b", 3, [ADD, MUL], NOW + 1)

    assert ids(board.dispatch(["both"])[0]) == {"both": ["m1", "a2"]}


def test_a_draining_worker_is_given_nothing() -> None:
    board = board_with(("w1", 4), ("w2", 4))
    board.submit([spec("t1"), spec("t2")], Priority.NORMAL, NOW)

    board.drain("w1", NOW + 1)

    assert ids(board.dispatch(["w1", "w2"])[0]) == {"w2": ["t1", "t2"]}
    assert ids(board.dispatch(["w1"])[0]) == {}


def test_a_worker_that_is_not_ready_is_given_nothing() -> None:
    board = board_with(("w1", 4), ("w2", 4))
    board.submit([spec("t1")], Priority.NORMAL, NOW)

    assert board.dispatch([])[0] == {}
    assert ids(board.dispatch(["w2"])[0]) == {"w2": ["t1"]}


def test_an_unknown_ready_worker_is_ignored() -> None:
    board = board_with(("w1", 1))
    board.submit([spec("t1")], Priority.NORMAL, NOW)

    assert ids(board.dispatch(["ghost", "w1"])[0]) == {"w1": ["t1"]}


def test_dispatch_with_an_empty_queue_assigns_nothing() -> None:
    board = board_with(("w1", 1))

    assert board.dispatch(["w1"])[0] == {}


def test_a_cancelled_queued_task_is_never_dispatched() -> None:
    board = board_with(("w1", 4))
    board.submit([spec("t1"), spec("t2")], Priority.NORMAL, NOW)

    result, effects = board.cancel("t1", NOW + 1)
    changed = bool(effects.finished)

    assert changed
    assert result.status == TaskState.CANCELLED
    assert len(board.queues) == 1
    assert ids(board.dispatch(["w1"])[0]) == {"w1": ["t2"]}
    assert len(board.queues) == 0
