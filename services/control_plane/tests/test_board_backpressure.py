"""Backpressure: each priority holds at most ``max_queued`` live tasks; past that a
submission is refused with ``queue_full`` at once, and nothing already accepted changes."""

from __future__ import annotations

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


def board(max_queued: int = 3) -> TaskBoard:
    b = TaskBoard(BoardConfig(max_queued=max_queued))
    b.register("w1", "host", 10, [ADD], NOW)
    return b


def specs(*ids: str) -> list[TaskSpec]:
    return [TaskSpec(name="add", id=i, args=[1, 2]) for i in ids]


def test_a_batch_that_would_pass_the_bound_is_refused_whole_with_queue_full() -> None:
    b = board()
    b.submit(specs("a", "b"), Priority.NORMAL, NOW)

    with pytest.raises(Rejected) as refused:
        b.submit(specs("c", "d"), Priority.NORMAL, NOW)

    assert refused.value.code == ErrorCode.QUEUE_FULL
    assert "normal queue is full" in refused.value.message
    assert refused.value.detail == {"priority": "normal", "live": 2, "bound": 3}
    assert b.get("c", NOW) is None
    assert b.get("d", NOW) is None
    assert b.live_count(Priority.NORMAL) == 2


def test_a_non_atomic_submission_accepts_up_to_the_bound_and_refuses_the_rest() -> None:
    b = board()

    ids, rejected = b.submit_each(specs("a", "b", "c", "d", "e"), Priority.NORMAL, NOW)[:2]

    assert ids == ["a", "b", "c", "", ""]
    refusals = [(r.code, r.index) for r in rejected]
    assert refusals == [(ErrorCode.QUEUE_FULL, 3), (ErrorCode.QUEUE_FULL, 4)]


def test_each_priority_has_its_own_bound() -> None:
    b = board()
    b.submit(specs("a", "b", "c"), Priority.NORMAL, NOW)

    assert b.submit(specs("h1", "h2", "h3"), Priority.HIGH, NOW)[0] == ["h1", "h2", "h3"]


def test_resubmitting_an_accepted_task_is_not_refused_when_the_queue_is_full() -> None:
    b = board()
    b.submit(specs("a", "b", "c"), Priority.NORMAL, NOW)

    assert b.submit(specs("a"), Priority.NORMAL, NOW)[0] == ["a"]  # a client's retry
    assert b.submit_each(specs("b"), Priority.NORMAL, NOW)[:2] == (["b"], [])


def test_finishing_a_task_makes_room_and_running_tasks_still_count() -> None:
    b = board()
    b.submit(specs("a", "b", "c"), Priority.NORMAL, NOW)
    b.dispatch(["w1"])  # all three assigned: they are live until they finish

    with pytest.raises(Rejected):
        b.submit(specs("d"), Priority.NORMAL, NOW)
    b.report("w1", [], [Outcome(task_id="a", ok=True, result=3)], NOW)

    assert b.submit(specs("d"), Priority.NORMAL, NOW)[0] == ["d"]
    assert b.live_count(Priority.NORMAL) == 3


def test_a_refused_submission_leaves_accepted_tasks_as_they_were() -> None:
    b = board()
    b.submit(specs("a", "b", "c"), Priority.NORMAL, NOW)

    with pytest.raises(Rejected):
        b.submit(specs("d", "e"), Priority.NORMAL, NOW)

    states = [r.status for r in (b.get(i, NOW) for i in "abc") if r is not None]
    assert states == [TaskState.QUEUED] * 3
    assert b.queues.depth(Priority.NORMAL) == 3


def test_delayed_tasks_count_against_the_bound_too() -> None:
    b = board(max_queued=1)
    b.submit([TaskSpec(name="add", id="later", args=[1, 2], eta=NOW + 60)], Priority.LOW, NOW)

    with pytest.raises(Rejected) as refused:
        b.submit(specs("now"), Priority.LOW, NOW)
    assert refused.value.code == ErrorCode.QUEUE_FULL
