"""The workflow book (core/workflows): chains, groups, chords and DAGs released as their
parents succeed, failures that cancel or let independent branches go on, cancel, links.

``Run`` stands in for the board: it queues what the book releases (refusing to queue an
id twice), cancels what it asks, and reports results back as the board would."""

from __future__ import annotations

import pytest
from workflow_kit import NOW, Run, chain, chord, result, step

from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.workflows import Actions, WorkflowBook
from fastworker_protocol import ErrorCode, Priority, TaskSpec, TaskState
from fastworker_protocol.workflows import (
    Feed,
    OnFailure,
    StepState,
    SubmitWorkflow,
    WorkflowState,
)


def test_a_chain_of_three_passes_each_result_as_the_first_argument_of_the_next() -> None:
    run = Run()
    wf = run.submit(chain(3))
    assert list(run.queued) == [f"{wf}.0"]

    run.succeed(f"{wf}.0", 3)
    assert run.queued[f"{wf}.1"].args == [3, 10]
    run.succeed(f"{wf}.1", 13)
    assert run.queued[f"{wf}.2"].args == [13, 10]
    run.succeed(f"{wf}.2", 23)

    assert run.state(wf) == WorkflowState.SUCCESS
    assert run.ended == [wf]
    assert run.book.info(wf).finished_at == NOW  # type: ignore[union-attr]


def test_a_group_of_100_is_released_at_once_with_deterministic_ids() -> None:
    run = Run()
    accepted = run.book.accept(
        SubmitWorkflow(steps=[step("add", i, 1) for i in range(100)], workflow_id="g"), NOW
    )

    assert accepted.task_ids == [f"g.{i}" for i in range(100)]
    assert [spec.id for spec, _ in accepted.release] == accepted.task_ids
    assert [spec.args for spec, _ in accepted.release] == [[i, 1] for i in range(100)]


def test_a_chord_of_1000_releases_its_callback_once_after_the_last_parent_fed_in_order() -> None:
    run = Run()
    wf = run.submit(chord(1000))
    assert len(run.queued) == 1000
    # Parents finish out of order; the callback waits for the very last.
    for i in [*range(999, 0, -1)]:
        run.succeed(f"{wf}.{i}", i * i)
        assert f"{wf}.1000" not in run.queued
    run.succeed(f"{wf}.0", 0)

    assert run.queued[f"{wf}.1000"].args == [[i * i for i in range(1000)]]
    run.succeed(f"{wf}.1000", 42)
    assert run.released[f"{wf}.1000"] == 1
    assert run.state(wf) == WorkflowState.SUCCESS


def test_a_diamond_runs_its_join_once_both_branches_succeeded() -> None:
    run = Run()
    wf = run.submit(
        [
            step("a"),
            step("b", after=[0], feed=Feed.ONE),
            step("c", after=[0], feed=Feed.ONE),
            step("d", after=[2, 1], feed=Feed.ALL),
        ]
    )
    run.succeed(f"{wf}.0", "A")
    assert set(run.queued) == {f"{wf}.1", f"{wf}.2"}
    run.succeed(f"{wf}.2", "C")
    assert f"{wf}.3" not in run.queued
    run.succeed(f"{wf}.1", "B")

    assert run.queued[f"{wf}.3"].args == [["C", "B"]]  # in ``after`` order
    run.succeed(f"{wf}.3")
    assert run.state(wf) == WorkflowState.SUCCESS


def test_a_step_waiting_on_parents_without_feed_gets_only_its_own_arguments() -> None:
    run = Run()
    wf = run.submit([step("a"), step("b", 7, after=[0])])
    run.succeed(f"{wf}.0", "ignored")

    assert run.queued[f"{wf}.1"].args == [7]


def test_each_step_is_released_at_its_own_priority() -> None:
    run = Run()
    wf = run.submit([step("a", priority=Priority.HIGH), step("b", priority=Priority.LOW)])

    assert run.priorities == {f"{wf}.0": Priority.HIGH, f"{wf}.1": Priority.LOW}


def test_a_failure_cancels_what_runs_skips_what_waits_and_queues_link_error() -> None:
    # Given two independent branches, one step each running
    run = Run()
    wf = run.submit(
        [step("a"), step("b"), step("c", after=[0]), step("d", after=[1])],
        link_error=[TaskSpec(name="alert", args=["x"])],
    )
    # When one fails for good
    run.fail(f"{wf}.0")
    # Then the other is cancelled, the waiting ones skipped, the workflow failed
    assert run.final[f"{wf}.1"] == TaskState.CANCELLED
    assert run.steps(wf) == [
        TaskState.FAILURE,
        TaskState.CANCELLED,
        StepState.SKIPPED,
        StepState.SKIPPED,
    ]
    assert run.state(wf) == WorkflowState.FAILURE
    assert run.ended == [wf]
    assert run.queued == {
        f"{wf}.link_error-0": TaskSpec(name="alert", id=f"{wf}.link_error-0", args=[wf, "x"])
    }


def test_with_continue_a_failure_skips_its_descendants_and_other_branches_finish() -> None:
    run = Run()
    wf = run.submit(
        [step("a"), step("b"), step("c", after=[0]), step("d", after=[1]), step("e", after=[2])],
        on_failure=OnFailure.CONTINUE,
        link_error=[TaskSpec(name="alert")],
    )
    run.fail(f"{wf}.0")

    assert run.state(wf) == WorkflowState.RUNNING
    assert run.steps(wf)[2:] == [StepState.SKIPPED, StepState.WAITING, StepState.SKIPPED]
    run.succeed(f"{wf}.1")
    assert run.state(wf) == WorkflowState.RUNNING
    assert f"{wf}.link_error-0" not in run.queued
    run.succeed(f"{wf}.3")

    assert run.state(wf) == WorkflowState.FAILURE
    assert run.steps(wf) == [
        TaskState.FAILURE,
        TaskState.SUCCESS,
        StepState.SKIPPED,
        TaskState.SUCCESS,
        StepState.SKIPPED,
    ]
    assert list(run.queued) == [f"{wf}.link_error-0"]
    assert run.ended == [wf]


def test_a_step_cancelled_on_its_own_fails_the_workflow_like_a_failure() -> None:
    run = Run()
    wf = run.submit([step("a"), step("b", after=[0])])
    run.end(f"{wf}.0", TaskState.CANCELLED)

    assert run.state(wf) == WorkflowState.FAILURE
    assert run.steps(wf) == [TaskState.CANCELLED, StepState.SKIPPED]


def test_success_queues_each_link_fed_the_final_steps_results_in_index_order() -> None:
    run = Run()
    wf = run.submit(
        [step("a"), step("b", after=[0]), step("c"), step("d", after=[0])],
        link=[TaskSpec(name="notify", args=["done"]), TaskSpec(name="log")],
        link_error=[TaskSpec(name="alert")],
    )
    run.succeed(f"{wf}.0", "A")
    run.succeed(f"{wf}.2", "C")
    run.succeed(f"{wf}.3", "D")
    run.succeed(f"{wf}.1", "B")

    assert run.queued == {
        f"{wf}.link-0": TaskSpec(name="notify", id=f"{wf}.link-0", args=[["B", "C", "D"], "done"]),
        f"{wf}.link-1": TaskSpec(name="log", id=f"{wf}.link-1", args=[["B", "C", "D"]]),
    }


def test_cancel_cancels_released_steps_skips_the_rest_and_queues_no_link() -> None:
    run = Run()
    wf = run.submit(
        [step("a"), step("b"), step("c", after=[0, 1])], link_error=[TaskSpec(name="alert")]
    )
    run.succeed(f"{wf}.0")

    actions = run.book.cancel(wf, NOW + 1)
    assert actions.cancel == [f"{wf}.1"]
    assert actions.release == []
    assert actions.ended == [wf]
    run.act(actions)
    info = run.book.info(wf)
    assert info is not None
    assert (info.state, info.finished_at) == (WorkflowState.CANCELLED, NOW + 1)
    assert run.steps(wf) == [TaskState.SUCCESS, TaskState.CANCELLED, StepState.SKIPPED]


def test_cancelling_a_final_workflow_changes_nothing() -> None:
    run = Run()
    wf = run.submit([step("a")])
    run.book.cancel(wf, NOW)

    assert run.book.cancel(wf, NOW + 1) == Actions()
    run.run_all()
    assert run.state(wf) == WorkflowState.CANCELLED


def test_cancelling_an_unknown_workflow_is_task_not_found() -> None:
    with pytest.raises(Rejected, match="workflow nope is unknown or expired") as raised:
        WorkflowBook().cancel("nope", NOW)
    assert raised.value.code == ErrorCode.TASK_NOT_FOUND


def test_accept_is_idempotent_by_workflow_id() -> None:
    run = Run()
    wf = run.submit(chain(3), workflow_id="order-7")
    again = run.book.accept(SubmitWorkflow(steps=chain(2), workflow_id="order-7"), NOW + 5)

    assert wf == again.workflow_id == "order-7"
    assert again.task_ids == ["order-7.0", "order-7.1", "order-7.2"]
    assert again.release == []


def test_an_empty_workflow_id_gets_a_fresh_one() -> None:
    ids = iter(["first", "second"])
    book = WorkflowBook(new_id=lambda: next(ids))

    assert book.accept(SubmitWorkflow(steps=[step()]), NOW).workflow_id == "first"
    assert book.accept(SubmitWorkflow(steps=[step()]), NOW).workflow_id == "second"
    assert WorkflowBook().accept(SubmitWorkflow(steps=[step()]), NOW).workflow_id != ""


def test_results_of_other_tasks_and_repeated_or_unfinished_results_change_nothing() -> None:
    run = Run()
    wf = run.submit([step("a"), step("b", after=[0])])
    book = run.book

    for task_id in ("plain", f"{wf}.7", f"{wf}.01", f"{wf}.1", "other.0", f"{wf}.link-0"):
        assert book.finished(result(task_id, TaskState.SUCCESS), NOW) == Actions()
    assert book.finished(result(f"{wf}.0", TaskState.RETRYING), NOW) == Actions()
    run.succeed(f"{wf}.0")
    assert book.finished(result(f"{wf}.0", TaskState.FAILURE), NOW) == Actions()
    assert run.steps(wf) == [TaskState.SUCCESS, TaskState.QUEUED]


def test_info_asks_the_board_how_far_released_steps_got() -> None:
    run = Run()
    wf = run.submit([step("a"), step("b"), step("c", after=[0])])
    states = {f"{wf}.0": TaskState.RUNNING}

    info = run.book.info(wf, states.get)
    assert info is not None
    assert [(s.task_id, s.name, s.state, s.after) for s in info.steps] == [
        (f"{wf}.0", "a", TaskState.RUNNING, []),
        (f"{wf}.1", "b", TaskState.QUEUED, []),
        (f"{wf}.2", "c", StepState.WAITING, [0]),
    ]
    assert info.submitted_at == NOW
    assert run.book.info("unknown") is None


def test_workflow_of_names_the_workflow_of_a_step_or_link() -> None:
    run = Run()
    wf = run.submit([step("a")], link=[TaskSpec(name="l")])

    assert run.book.workflow_of(f"{wf}.0") == wf
    assert run.book.workflow_of(f"{wf}.link-0") == wf
    assert run.book.workflow_of("plain") is None
