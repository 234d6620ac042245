"""A task submitted by a short name (``add`` for ``app.tasks.add``) is taken under the full
name it stands for, wherever a task is named: submissions, batches, workflows, run-time
schedules, limits and dead-letter filters. An ambiguous short name is refused as
``unknown_task``, listing the names it could mean. Pure: a board and explicit times."""

from __future__ import annotations

from typing import Any

import pytest

from fastworker_control_plane.core import dead_letter_ops, queue_controls, runtime_schedules
from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.limits import Scope
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.workflow_check import check, named
from fastworker_protocol import (
    ErrorCode,
    FailedFilter,
    Outcome,
    Param,
    Priority,
    ScheduleSpec,
    TaskError,
    TaskSignature,
    TaskSpec,
)
from fastworker_protocol.workflows import SubmitWorkflow, WorkflowStep

NOW = 1_000_000.0
AMBIGUOUS = (
    "task name 'notify' is ambiguous: billing.tasks.notify, shop.tasks.notify; give the full name"
)


def signature(name: str, *params: str) -> TaskSignature:
    return TaskSignature(
        name=name, params=[Param(name=p, kind="POSITIONAL_OR_KEYWORD") for p in params]
    )


def registered_board() -> TaskBoard:
    """Two modules' ``notify``, and one ``add``, registered by a subworker."""
    board = TaskBoard()
    names = ("billing.tasks.notify", "shop.tasks.notify")
    signatures = [*(signature(n, "user") for n in names), signature("app.tasks.add", "x", "y")]
    board.register("w", "w", 4, signatures, NOW)
    return board


def spec(name: str, *args: Any) -> TaskSpec:
    return TaskSpec(name=name, args=list(args))


def test_a_unique_bare_name_is_taken_under_its_full_name() -> None:
    board = registered_board()

    [task_id], _ = board.submit([spec("add", 1, 2)], Priority.NORMAL, NOW)

    record = board.record(task_id, NOW)
    assert record is not None
    assert record.name == "app.tasks.add"
    assert board.stats.line("app.tasks.add", Priority.NORMAL).submitted == 1


def test_a_dotted_suffix_and_the_full_name_are_taken_too() -> None:
    board = registered_board()

    ids, _ = board.submit(
        [spec("tasks.add", 1, 2), spec("billing.tasks.notify", "ann")], Priority.NORMAL, NOW
    )

    names = [record.name for i in ids if (record := board.record(i, NOW)) is not None]
    assert names == ["app.tasks.add", "billing.tasks.notify"]


def test_an_ambiguous_bare_name_is_refused_listing_the_candidates() -> None:
    board = registered_board()

    with pytest.raises(Rejected) as refused:
        board.submit([spec("add", 1, 2), spec("notify", "ann")], Priority.NORMAL, NOW)

    assert refused.value.code == ErrorCode.UNKNOWN_TASK
    assert refused.value.message == AMBIGUOUS
    assert refused.value.detail["index"] == 1
    assert refused.value.detail["candidates"] == ["billing.tasks.notify", "shop.tasks.notify"]
    assert len(board) == 0  # nothing of the batch was taken


def test_a_batch_taken_task_by_task_refuses_only_the_ambiguous_one() -> None:
    board = registered_board()

    ids, rejected, _ = board.submit_each(
        [spec("notify", "ann"), spec("add", 1, 2)], Priority.NORMAL, NOW
    )

    assert ids[0] == ""
    assert ids[1]
    [refusal] = rejected
    assert (refusal.code, refusal.index, refusal.message) == (ErrorCode.UNKNOWN_TASK, 0, AMBIGUOUS)


def test_an_unknown_name_is_refused_as_before() -> None:
    board = registered_board()

    with pytest.raises(Rejected, match="no subworker has registered a task named 'sub'"):
        board.submit([spec("sub")], Priority.NORMAL, NOW)


def test_a_task_is_the_same_task_by_idempotency_key_whichever_name_it_is_given() -> None:
    board = registered_board()
    keyed = TaskSpec(name="add", args=[1, 2], idempotency_key="k")

    [first], _ = board.submit([keyed], Priority.NORMAL, NOW)
    [again], _ = board.submit(
        [TaskSpec(name="app.tasks.add", args=[1, 2], idempotency_key="k")], Priority.NORMAL, NOW
    )

    assert again == first


def test_a_workflow_runs_its_steps_under_their_full_names() -> None:
    board = registered_board()
    submit = SubmitWorkflow(
        steps=[WorkflowStep(task=spec("add", 1, 2)), WorkflowStep(task=spec("tasks.add", 3, 4))],
        link=[spec("billing.tasks.notify")],
    )

    resolved = named(submit, board.catalog)

    check(resolved, board.catalog)
    assert [s.task.name for s in resolved.steps] == ["app.tasks.add", "app.tasks.add"]
    assert [s.name for s in resolved.link] == ["billing.tasks.notify"]


def test_a_workflow_naming_an_ambiguous_task_is_refused_at_that_step() -> None:
    board = registered_board()
    submit = SubmitWorkflow(
        steps=[WorkflowStep(task=spec("add", 1, 2)), WorkflowStep(task=spec("notify", "ann"))]
    )

    with pytest.raises(Rejected) as refused:
        named(submit, board.catalog)

    assert refused.value.code == ErrorCode.UNKNOWN_TASK
    assert refused.value.message == f"step 1: {AMBIGUOUS}"
    assert refused.value.detail["index"] == 1


def test_a_run_time_schedule_keeps_the_full_name_of_its_task() -> None:
    board = registered_board()
    weekly = ScheduleSpec(name="weekly", task="add", args=[1, 2], interval=60.0)

    info, created = runtime_schedules.add(board, weekly, NOW)

    assert created
    assert info.task == "app.tasks.add"
    again, created = runtime_schedules.add(board, weekly, NOW + 1)  # a retried add
    assert not created
    assert again.task == "app.tasks.add"


def test_a_run_time_schedule_of_an_ambiguous_task_is_refused() -> None:
    board = registered_board()
    weekly = ScheduleSpec(name="weekly", task="notify", args=["ann"], interval=60.0)

    with pytest.raises(
        Rejected, match=r"is ambiguous: billing\.tasks\.notify, shop\.tasks\.notify"
    ):
        runtime_schedules.add(board, weekly, NOW)


def test_a_task_limit_set_by_a_short_name_limits_the_full_name() -> None:
    board = registered_board()

    changed = queue_controls.set_limit(board, Scope.TASK, "add", "5/s", None)

    assert changed == "app.tasks.add"
    assert (Scope.TASK, "app.tasks.add") in board.limits.settings
    assert queue_controls.set_limit(board, Scope.TASK, "later", None, 2) == "later"


def test_dead_letters_are_selected_by_a_short_task_name_too() -> None:
    # Given a task that failed for good under its full name
    board = registered_board()
    boom = TaskError(type="ValueError", message="boom")
    [task_id], _ = board.submit([spec("add", 1, 2)], Priority.NORMAL, NOW)
    board.dispatch(["w"], NOW)
    board.report("w", [], [Outcome(task_id=task_id, ok=False, error=boom)], NOW)

    # When the dead letters are listed by the bare name, or by an ambiguous one
    listed = dead_letter_ops.listing(board, FailedFilter(task_name="add"), 10, NOW)

    # Then the bare name stands for the full one, and the ambiguous one is refused
    assert [(d.task_id, d.name) for d in listed.tasks] == [(task_id, "app.tasks.add")]
    with pytest.raises(Rejected, match="is ambiguous"):
        dead_letter_ops.listing(board, FailedFilter(task_name="notify"), 10, NOW)
