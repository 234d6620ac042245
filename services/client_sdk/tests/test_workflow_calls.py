"""The clients' workflow calls: what they send and how they read replies, without a network."""

from __future__ import annotations

import uuid

import pytest

from fastworker import (
    Client,
    RequestRejected,
    SyncClient,
    TaskRegistry,
    TaskResult,
    TaskStatus,
    Timeout,
    chain,
    chord,
    group,
    sig,
    task,
)
from fastworker._calls import left_to_wait
from fastworker._workflows import (
    final_workflow,
    pause_before_waiting_again,
    traced,
    workflow_message,
)
from fastworker.testing import eager
from fastworker_protocol.workflows import OnFailure, WorkflowInfo, WorkflowState

registry = TaskRegistry()


@task(registry=registry)
def add(x: int, y: int) -> int:
    return x + y


@task(registry=registry)
def total(values: list[int]) -> int:
    return sum(values)


def info(state: WorkflowState) -> WorkflowInfo:
    return WorkflowInfo(workflow_id="w", state=state, steps=[])


def test_a_workflow_without_an_id_gets_a_fresh_one_before_it_is_sent() -> None:
    # Given a chain and no workflow id
    item = add.s(1, 2) | add.s(3)
    # When its message is made twice
    first, shape = workflow_message(item, None, "cancel", None, None)
    second, _ = workflow_message(item, None, "cancel", None, None)
    # Then each has a fresh uuid4 hex id (the client re-sends the same message on retries)
    assert uuid.UUID(hex=first.workflow_id).version == 4
    assert first.workflow_id != second.workflow_id
    assert [s.after for s in first.steps] == [[], [0]]
    assert shape == 1  # the chain's value: its last step's result


def test_a_given_workflow_id_and_the_options_are_kept() -> None:
    message, shape = workflow_message(
        chord([add.s(i, i) for i in range(3)], total.s()),
        "wf-1",
        "continue",
        sig("notify"),
        [sig("alert"), sig("page")],
    )
    assert message.workflow_id == "wf-1"
    assert message.on_failure is OnFailure.CONTINUE
    assert [t.name for t in message.link] == ["notify"]
    assert [t.name for t in message.link_error] == ["alert", "page"]
    assert len(message.steps) == 4
    assert shape == 3  # the chord's value: its callback's result


def test_without_tracing_the_message_is_sent_as_compiled() -> None:
    message, shape = workflow_message(group(add.s(1, 1), add.s(2, 2)), "w", "cancel", None, None)
    assert shape == (0, 1)  # the group's value: the list of its members' results
    with traced(message) as sent:
        assert sent is message


def test_a_running_workflow_is_asked_again_while_time_is_left_never_in_a_busy_loop() -> None:
    running = info(WorkflowState.RUNNING)
    assert pause_before_waiting_again(running, deadline=10.0, asked=0.0, now=5.0) == 0.0
    assert pause_before_waiting_again(running, deadline=10.0, asked=0.0, now=10.0) is None
    # Answered at once (the control plane held --max-held-waits): asked again, after a pause
    assert pause_before_waiting_again(running, deadline=10.0, asked=5.0, now=5.1) == pytest.approx(
        0.4
    )
    assert pause_before_waiting_again(running, deadline=5.3, asked=5.0, now=5.1) == pytest.approx(
        0.2
    )
    assert pause_before_waiting_again(info(WorkflowState.SUCCESS), 10.0, 0.0, 5.0) is None


def test_a_workflow_still_running_at_the_deadline_is_a_timeout() -> None:
    with pytest.raises(Timeout, match="still running"):
        final_workflow(info(WorkflowState.RUNNING), 2.0)
    assert final_workflow(info(WorkflowState.FAILURE), 2.0).state is WorkflowState.FAILURE


def test_eager_refuses_workflows_with_a_pointer_to_the_cluster_fixture() -> None:
    with eager(registry), SyncClient() as client:
        with pytest.raises(RequestRejected, match="fastworker_cluster"):
            client.submit_workflow(add.s(1, 2) | add.s(3))
        with pytest.raises(RequestRejected, match="not supported under eager"):
            client.get_workflow("w")


async def test_eager_refuses_workflows_from_the_async_client_too() -> None:
    with eager(registry):
        async with Client() as client:
            with pytest.raises(RequestRejected, match="fastworker_cluster"):
                await client.submit_workflow(group(add.s(1, 1)))
            with pytest.raises(RequestRejected, match="fastworker_cluster"):
                await client.cancel_workflow("w")


def test_a_signature_delay_queues_one_task() -> None:
    with eager(registry) as backend:
        task_id = add.s(2, 3).delay()
        assert backend.submitted(add)[0].task_id == task_id


def test_a_composite_delay_submits_a_workflow() -> None:
    with eager(registry), pytest.raises(RequestRejected, match="workflows"):
        chain(add.s(1, 1), add.s(2)).delay(workflow_id="x")


def test_a_submit_answered_before_its_task_ended_waits_the_rest_with_get() -> None:
    queued = TaskResult(task_id="t", name="add", status=TaskStatus.QUEUED)
    done = TaskResult(task_id="t", name="add", status=TaskStatus.SUCCESS, result=3)

    assert left_to_wait(queued, 30.0, started=100.0, now=100.2) == pytest.approx(29.8)
    assert left_to_wait(queued, 30.0, started=100.0, now=130.0) is None  # no time left
    assert left_to_wait(done, 30.0, started=100.0, now=100.2) is None
    assert left_to_wait(None, 30.0, started=100.0, now=100.2) is None
