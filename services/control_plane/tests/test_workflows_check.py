"""Checking a workflow before any of it is accepted (core/workflow_check): its shape, the
limits, and every task against the registered signatures, counting the fed argument."""

from __future__ import annotations

from typing import Any

import pytest
from workflow_kit import NOW, step

from fastworker_control_plane.core.board_types import BoardConfig
from fastworker_control_plane.core.catalog import Catalog
from fastworker_control_plane.core.limits import Limits
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.workflow_check import find_cycle
from fastworker_control_plane.core.workflows import WorkflowBook, check
from fastworker_protocol import ErrorCode, Param, TaskSignature, TaskSpec
from fastworker_protocol.workflows import (
    MAX_EDGES,
    MAX_LINKS,
    MAX_PARENTS,
    MAX_STEPS,
    Feed,
    SubmitWorkflow,
    WorkflowStep,
)


def signature(name: str, *params: str, kind: str = "POSITIONAL_OR_KEYWORD") -> TaskSignature:
    return TaskSignature(name=name, params=[Param(name=p, kind=kind) for p in params])


def catalog() -> Catalog:
    known = Catalog()
    known.learn(
        [
            signature("a"),
            signature("b"),
            signature("c"),
            signature("d"),
            signature("add", "x", "y"),
            signature("one", "x"),
            signature("tsum", "values"),
            signature("alert", "workflow_id"),
        ],
        Limits(),
    )
    return known


def refusal(steps: list[WorkflowStep], **options: Any) -> Rejected:
    with pytest.raises(Rejected) as raised:
        check(SubmitWorkflow(steps=steps, **options), catalog())
    return raised.value


def test_a_well_formed_workflow_passes() -> None:
    check(
        SubmitWorkflow(
            steps=[
                step("add", 1, 2),
                step("add", 3, after=[0], feed=Feed.ONE),
                step("tsum", after=[0, 1], feed=Feed.ALL),
                step("a", after=[2]),
            ],
            link=[TaskSpec(name="one")],
            link_error=[TaskSpec(name="alert")],
        ),
        catalog(),
    )


def test_a_cycle_is_refused_naming_its_steps_in_order() -> None:
    rejected = refusal(
        [step("a"), step("b", after=[0, 3]), step("c", after=[1]), step("d", after=[2])]
    )

    assert rejected.code == ErrorCode.INVALID_MESSAGE
    assert rejected.message == "steps 1 -> 2 -> 3 -> 1 form a cycle: none of them could ever run"
    assert rejected.detail == {"cycle": [1, 2, 3]}


def test_find_cycle_finds_none_in_a_dag_given_in_any_order() -> None:
    assert find_cycle([[1], [2], []]) == []
    assert find_cycle([[1], [0]]) == [0, 1]
    assert find_cycle([[], [2], [3], [1]]) == [1, 3, 2]


def test_an_unknown_task_is_refused_naming_its_step() -> None:
    rejected = refusal([step("a"), step("nope", after=[0])])

    assert rejected.code == ErrorCode.UNKNOWN_TASK
    assert rejected.message == "step 1: no subworker has registered a task named 'nope'"
    assert rejected.detail == {"index": 1, "task_name": "nope"}


def test_the_fed_argument_counts_against_the_signature() -> None:
    # add(x, y) fed its parent's result takes one argument of its own, not two
    rejected = refusal([step("add", 1, 2), step("add", 3, 4, after=[0], feed=Feed.ONE)])

    assert rejected.code == ErrorCode.INVALID_ARGUMENTS
    assert rejected.index == 1
    assert rejected.message.startswith("step 1: add(): too many positional arguments")
    assert rejected.message.endswith("(its first positional argument is its parent's result)")


def test_a_step_fed_nothing_must_take_its_arguments_whole() -> None:
    rejected = refusal([step("add", 1)])

    assert rejected.code == ErrorCode.INVALID_ARGUMENTS
    assert "missing a required argument: 'y'" in rejected.message


@pytest.mark.parametrize(
    ("links", "message"),
    [
        ({"link": [TaskSpec(name="nope")]}, "link 0: no subworker has registered"),
        ({"link": [TaskSpec(name="a")]}, "link 0: a(): too many positional arguments"),
        ({"link_error": [TaskSpec(name="alert", args=[1])]}, "link_error 0: alert(): too many"),
    ],
)
def test_links_are_checked_fed_their_argument(links: dict[str, Any], message: str) -> None:
    rejected = refusal([step("a")], **links)

    assert rejected.message.startswith(message)
    assert rejected.index is None


@pytest.mark.parametrize(
    ("after", "message"),
    [
        ([5], "step 1 runs after step 5, which does not exist (0 to 1)"),
        ([-1], "step 1 runs after step -1, which does not exist (0 to 1)"),
        ([1], "step 1 runs after itself"),
        ([0, 0], "step 1 names step 0 twice in after"),
    ],
)
def test_bad_parents_are_refused(after: list[int], message: str) -> None:
    rejected = refusal([step("a"), step("b", after=after)])

    assert (rejected.code, rejected.message, rejected.index) == (
        ErrorCode.INVALID_MESSAGE,
        message,
        1,
    )


def test_feed_one_needs_exactly_one_parent_and_feed_all_at_least_one() -> None:
    one = refusal([step("a"), step("b"), step("one", after=[0, 1], feed=Feed.ONE)])
    assert one.message == "step 2 is fed its parent's result (feed=one) but runs after 2 steps"
    root = refusal([step("one", feed=Feed.ONE)])
    assert root.message == "step 0 is fed its parent's result (feed=one) but runs after 0 steps"
    empty = refusal([step("tsum", feed=Feed.ALL)])
    assert empty.message == "step 0 is fed its parents' results (feed=all) but has no parents"


def test_a_workflow_without_steps_is_refused() -> None:
    assert refusal([]).message == "a workflow needs at least one step"


def test_more_steps_than_the_limit_are_refused() -> None:
    rejected = refusal([step("a")] * (MAX_STEPS + 1))

    assert rejected.message == f"a workflow has at most {MAX_STEPS} steps, not {MAX_STEPS + 1}"


def test_more_parents_than_the_limit_are_refused() -> None:
    steps = [step("a"), step("tsum", after=list(range(MAX_PARENTS + 1)), feed=Feed.ALL)]

    rejected = refusal(steps)
    assert rejected.message == f"step 1 runs after {MAX_PARENTS + 1} steps (at most {MAX_PARENTS})"
    assert rejected.index == 1


def test_too_many_parents_in_all_are_refused() -> None:
    width = 1001  # two full layers of 1,001 steps: 1,002,001 parent links
    steps = [step("a")] * width + [step("b", after=list(range(width)))] * width

    assert width * width > MAX_EDGES
    assert refusal(steps).message == f"a workflow's steps have at most {MAX_EDGES} parents in all"


def test_too_many_links_are_refused() -> None:
    rejected = refusal([step("a")], link=[TaskSpec(name="one")] * (MAX_LINKS + 1))

    assert rejected.message.startswith(f"a workflow has at most {MAX_LINKS} link")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (TaskSpec(name="a", id="mine"), "step 0: its task id is given by the control plane"),
        (TaskSpec(name="a", idempotency_key="k"), "step 0: a workflow's tasks take no idem"),
    ],
)
def test_steps_carry_no_id_and_no_idempotency_key(spec: TaskSpec, message: str) -> None:
    assert refusal([WorkflowStep(task=spec)]).message.startswith(message)


def test_an_oversize_step_is_refused() -> None:
    with pytest.raises(Rejected) as raised:
        check(
            SubmitWorkflow(steps=[step("one", "x" * 2000)]),
            catalog(),
            BoardConfig(max_message_size=2048),
        )
    assert raised.value.code == ErrorCode.OVERSIZE


def test_accept_checks_the_shape_again() -> None:
    with pytest.raises(Rejected, match="runs after itself"):
        WorkflowBook().accept(SubmitWorkflow(steps=[step("a", after=[0])]), NOW)
