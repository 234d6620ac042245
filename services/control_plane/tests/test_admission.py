"""Admission refuses arguments nested past the protocol's limit, before anything tries to
encode them: a task accepted must be one the journal, the dashboard and dispatch can carry."""

from __future__ import annotations

from typing import Any

import pytest

from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import MAX_NESTING, ErrorCode, Param, Priority, TaskSignature, TaskSpec

NOW = 1000.0
ECHO = TaskSignature(
    name="echo",
    params=[Param(name="value", kind="POSITIONAL_OR_KEYWORD", has_default=True),
            Param(name="options", kind="VAR_KEYWORD")],
)  # fmt: skip


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def board() -> TaskBoard:
    board = TaskBoard(BoardConfig())
    board.learn_tasks([ECHO])
    return board


@pytest.mark.parametrize(
    "spec",
    [
        TaskSpec(name="echo", args=[nested(MAX_NESTING)]),  # with the args array: one more
        TaskSpec(name="echo", kwargs={"options": nested(MAX_NESTING)}),
        TaskSpec(name="echo", args=[nested(978)]),  # deep enough to exhaust the encoder
        TaskSpec(name="echo", args=[nested(100_000)]),
    ],
    ids=["args", "kwargs", "978", "100000"],
)
def test_arguments_nested_past_the_limit_are_invalid_arguments_and_nothing_is_queued(
    board: TaskBoard, spec: TaskSpec
) -> None:
    with pytest.raises(Rejected) as refused:
        board.submit([spec], Priority.NORMAL, NOW)
    assert refused.value.code == ErrorCode.INVALID_ARGUMENTS
    assert f"more than {MAX_NESTING} arrays and maps deep" in refused.value.message
    assert refused.value.detail == {"index": 0, "task_name": "echo"}
    assert len(board) == 0


def test_a_non_atomic_submit_refuses_the_deep_task_alone(board: TaskBoard) -> None:
    ids, rejected = board.submit_each(
        [TaskSpec(name="echo", args=[nested(978)]), TaskSpec(name="echo", args=[1])],
        Priority.NORMAL,
        NOW,
    )[:2]
    assert ids[0] == ""
    assert ids[1]
    assert [(r.index, r.code) for r in rejected] == [(0, ErrorCode.INVALID_ARGUMENTS)]


def test_arguments_at_the_limit_are_accepted(board: TaskBoard) -> None:
    deepest = TaskSpec(name="echo", args=[nested(MAX_NESTING - 1)])  # the args array is one
    assert board.submit([deepest], Priority.NORMAL, NOW)[0]
    assert len(board) == 1
