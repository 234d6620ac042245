"""Workflows (chains, groups, chords, DAGs) run by a real control plane and subworkers.

Every workflow is submitted with ``Client.submit_workflow`` and followed with
``wait_workflow``/``get_workflow``; what a step returned is read as its task's result
(step ``i`` of workflow ``w`` is task ``w.i``). Runs are counted in files the tasks write.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import pytest
from harness import Cluster, Proc, wait_until
from it_tasks import add, explode, flaky, ident, nap, note, tally, tsum

from fastworker import (
    Client,
    ControlPlaneUnavailable,
    RequestRejected,
    SyncClient,
    TaskNotFound,
    TaskStatus,
    Timeout,
    Workflow,
    chord,
    group,
    sig,
)
from fastworker_protocol import Priority, TaskSpec
from fastworker_protocol.workflows import (
    StepState,
    SubmitWorkflow,
    WorkflowAccepted,
    WorkflowInfo,
    WorkflowState,
    WorkflowStep,
)

pytestmark = pytest.mark.timeout(240)


def callback_values(runs: Path) -> object:
    """The list the ``tally`` callback counting in ``runs`` got last."""
    return json.loads(Path(f"{runs}.values").read_text())


async def step_values(client: Client, info: WorkflowInfo) -> list[object]:
    results = await client.wait_results([s.task_id for s in info.steps], timeout=20)
    return [r.result for r in results]


async def test_a_chain_of_three_passes_each_result_to_the_next(client: Client) -> None:
    # Given a chain add(1, 2) -> add(_, 3) -> add(_, 4)
    item = add.s(1, 2) | add.s(3) | add.s(4)
    # When it is submitted and waited for
    workflow_id = await client.submit_workflow(item)
    info = await client.wait_workflow(workflow_id, timeout=30)
    # Then each step got the one before's result
    assert info.state is WorkflowState.SUCCESS
    assert [s.task_id for s in info.steps] == [f"{workflow_id}.{i}" for i in range(3)]
    assert await step_values(client, info) == [3, 6, 10]


async def test_a_group_of_100_runs_in_parallel_over_two_subworkers(cluster: Cluster) -> None:
    # Given a control plane that only dispatches, and two subworkers
    cluster.control_plane(local_concurrency=0)
    cluster.subworker(concurrency=8)
    cluster.subworker(concurrency=8)
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        # When a group of 100 naps runs
        workflow_id = await client.submit_workflow(group(nap.s(0.05, i) for i in range(100)))
        info = await client.wait_workflow(workflow_id, timeout=60)
        values = await step_values(client, info)
    # Then every member ran, on both subworkers
    assert info.state is WorkflowState.SUCCESS
    assert [v["tag"] for v in values] == list(range(100))  # type: ignore[index]
    assert len({v["pid"] for v in values}) == 2  # type: ignore[index]


async def test_a_chord_of_1000_calls_its_callback_once_with_every_result_in_order(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given two subworkers and a chord of 1,000 whose callback counts its runs
    cluster.control_plane(local_concurrency=0)
    cluster.subworker(concurrency=16)
    cluster.subworker(concurrency=16)
    runs = tmp_path / "callback"
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        started = time.monotonic()
        # When it is submitted and waited for
        workflow_id = await client.submit_workflow(
            chord([ident.s(i, 0) for i in range(1000)], tally.s(str(runs)))
        )
        info = await client.wait_workflow(workflow_id, timeout=120)
        took = time.monotonic() - started
        callback = await client.wait_result(info.steps[-1].task_id)
    # Then the callback ran once, with the 1,000 results in member order
    assert info.state is WorkflowState.SUCCESS
    assert len(info.steps) == 1001
    assert callback.result == 1000
    assert runs.read_text() == "1"
    assert callback_values(runs) == list(range(1000))
    print(f"chord of 1,000 end to end: {took:.2f} s")


def test_the_blocking_client_submits_and_waits_for_a_workflow(cluster: Cluster) -> None:
    cluster.control_plane()
    with SyncClient(cluster.discovery, timeout=20, connect_timeout=20) as client:
        workflow_id = client.submit_workflow(chord([add.s(i, i) for i in range(10)], tsum.s()))
        info = client.wait_workflow(workflow_id, timeout=30)
        assert info.state is WorkflowState.SUCCESS
        assert client.wait(info.steps[-1].task_id) == 90
        assert client.get_workflow(workflow_id).state is WorkflowState.SUCCESS


async def test_a_workflow_submitted_again_with_its_id_runs_once(
    client: Client, tmp_path: Path
) -> None:
    # Given a chord whose callback counts its runs, submitted twice with one workflow id
    runs = tmp_path / "callback"
    item = chord([add.s(i, 0) for i in range(5)], tally.s(str(runs)))
    first = await client.submit_workflow(item, workflow_id="once")
    second = await client.submit_workflow(item, workflow_id="once")
    # When it has ended
    info = await client.wait_workflow(first, timeout=30)
    # Then it is one workflow, and its callback ran once
    assert first == second == "once"
    assert info.state is WorkflowState.SUCCESS
    assert runs.read_text() == "1"
    assert callback_values(runs) == [0, 1, 2, 3, 4]


async def test_a_diamond_dag_feeds_the_join_both_branches_in_after_order(client: Client) -> None:
    # Given a -> (b, c) -> d, d fed both branches' results
    wf = Workflow()
    a = wf.add(add.s(1, 1))
    b = wf.add(add.s(10), after=[a], feed="one")
    c = wf.add(add.s(100), after=[a], feed="one")
    wf.add(tsum.s(), after=[b, c], feed="all")
    # When it runs
    info = await client.wait_workflow(await client.submit_workflow(wf), timeout=30)
    # Then d summed b and c
    assert info.state is WorkflowState.SUCCESS
    assert await step_values(client, info) == [2, 12, 102, 114]


def failing_with_a_slow_branch() -> Workflow:
    """A step that fails at once, and an independent branch: a nap, then an add."""
    wf = Workflow()
    wf.add(explode.s("boom"))
    slow = wf.add(nap.s(1.0))
    wf.add(add.si(1, 2), after=[slow])
    return wf


async def test_a_failing_step_cancels_what_has_not_started(client: Client) -> None:
    # When a step fails under on_failure="cancel" (the default)
    workflow_id = await client.submit_workflow(failing_with_a_slow_branch())
    info = await client.wait_workflow(workflow_id, timeout=30)
    # Then the workflow failed and the step waiting on the other branch never ran
    assert info.state is WorkflowState.FAILURE
    assert info.steps[0].state == StepState.FAILURE
    assert info.steps[2].state in (StepState.SKIPPED, StepState.CANCELLED)


async def test_with_continue_an_independent_branch_finishes_after_a_failure(
    client: Client,
) -> None:
    # When a step fails under on_failure="continue"
    workflow_id = await client.submit_workflow(failing_with_a_slow_branch(), on_failure="continue")
    info = await client.wait_workflow(workflow_id, timeout=30)
    # Then the workflow failed, but the independent branch ran to its end
    assert info.state is WorkflowState.FAILURE
    assert info.steps[2].state == StepState.SUCCESS
    assert (await client.wait_result(info.steps[2].task_id)).result == 3


async def test_a_step_is_retried_inside_a_workflow(client: Client, tmp_path: Path) -> None:
    # Given a chain whose first step fails twice, then succeeds (it returns its attempt)
    counter = tmp_path / "flaky"
    item = flaky.s(str(counter), 3) | add.s(100)
    # When it runs
    info = await client.wait_workflow(await client.submit_workflow(item), timeout=30)
    # Then the retried step's result went on to the next one
    assert info.state is WorkflowState.SUCCESS
    assert await step_values(client, info) == [3, 103]


async def test_a_running_workflow_can_be_cancelled(client: Client) -> None:
    # Given a workflow of long naps followed by an add, some running
    item = group(nap.s(30, i) for i in range(3)) | add.si(1, 1)
    workflow_id = await client.submit_workflow(item)

    async def running() -> bool:
        info = await client.get_workflow(workflow_id)
        return any(s.state == StepState.RUNNING for s in info.steps)

    await wait_until(running, 10, "a running step")
    # When it is cancelled
    assert await client.cancel_workflow(workflow_id) is True
    info = await client.wait_workflow(workflow_id, timeout=20)
    # Then it ended cancelled, its last step never ran, and a second cancel changes nothing
    assert info.state is WorkflowState.CANCELLED
    assert info.steps[-1].state in (StepState.SKIPPED, StepState.CANCELLED)
    assert await client.cancel_workflow(workflow_id) is False


async def test_link_error_runs_on_failure_and_link_on_success(
    client: Client, tmp_path: Path
) -> None:
    # Given a failing workflow with a link_error, and a succeeding one with a link
    errors, successes = tmp_path / "errors", tmp_path / "successes"
    failing = await client.submit_workflow(
        explode.s("boom"), link_error=note.s(str(errors)), link=note.s(str(successes))
    )
    passing = await client.submit_workflow(
        group(add.s(1, 1), add.s(2, 2)), link=note.s(str(successes))
    )
    # When both have ended
    assert (await client.wait_workflow(failing, timeout=30)).state is WorkflowState.FAILURE
    assert (await client.wait_workflow(passing, timeout=30)).state is WorkflowState.SUCCESS

    # (each file is complete once its task has ended: a file may exist before it is written)
    await client.wait(f"{failing}.link_error-0", timeout=30)
    await client.wait(f"{passing}.link-0", timeout=30)
    # Then link_error got the failed workflow's id, and link the other's last results
    assert [json.loads(line) for line in errors.read_text().splitlines()] == [failing]
    assert [json.loads(line) for line in successes.read_text().splitlines()] == [[2, 4]]


async def test_an_unknown_workflow_is_not_found(client: Client) -> None:
    with pytest.raises(TaskNotFound):
        await client.get_workflow("no-such-workflow")
    with pytest.raises(TaskNotFound):
        await client.wait_workflow("no-such-workflow", timeout=1)


async def test_a_cycle_is_refused_before_anything_runs(client: Client) -> None:
    # Given a workflow message whose two steps wait for each other (the canvas cannot
    # build one: this is what another client could send)
    spec = TaskSpec(name="add", args=[1, 2])
    message = SubmitWorkflow(
        steps=[WorkflowStep(task=spec, after=[1]), WorkflowStep(task=spec, after=[0])],
        workflow_id="cyclic",
    )
    # When it is sent, it is refused, naming the cycle, and nothing was queued
    with pytest.raises(RequestRejected, match="cycle"):
        await client._request(Priority.NORMAL, message, WorkflowAccepted, None)
    assert list(await client.list_tasks()) == []


async def test_an_unknown_task_in_a_dag_is_refused_before_anything_runs(client: Client) -> None:
    # Given a DAG whose second step names a task nobody registered
    wf = Workflow()
    first = wf.add(add.s(1, 1))
    wf.add(sig("no_such_task"), after=[first], feed="one")
    # When it is submitted, it is refused and not one step was queued
    with pytest.raises(RequestRejected, match="no_such_task"):
        await client.submit_workflow(wf)
    assert list(await client.list_tasks()) == []


async def test_a_chord_survives_a_kill_of_its_control_plane_and_calls_back_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a durable control plane that only dispatches, two subworkers, and a chord
    # of 1,000 slow-ish steps whose callback counts its runs
    state, runs = tmp_path / "state", tmp_path / "callback"

    def start() -> Proc:
        return cluster.control_plane("--state-dir", str(state), local_concurrency=0)

    plane = start()
    cluster.subworker(concurrency=8)
    cluster.subworker(concurrency=8)
    async with cluster.client(timeout=5, retries=1) as client:
        await cluster.workers(client, 2)
        item = chord([ident.s(i, 0.05) for i in range(1000)], tally.s(str(runs)))
        workflow_id = await client.submit_workflow(item)

        async def partly_done() -> bool:
            info = await client.get_workflow(workflow_id)
            return sum(s.state == StepState.SUCCESS for s in info.steps) >= 200

        await wait_until(partly_done, 60, "200 chord members done")
        assert not runs.exists()  # the kill below is mid-chord: the callback has not run
        # When the control plane is killed mid-chord and started again on its journal
        plane.signal(signal.SIGKILL)
        await asyncio.to_thread(plane.wait)
        start()
        info = await ended(client, workflow_id, 180)
    # Then the callback ran exactly once, with every result in order
    assert info.state is WorkflowState.SUCCESS
    assert runs.read_text() == "1"
    assert callback_values(runs) == list(range(1000))


async def ended(client: Client, workflow_id: str, timeout: float) -> WorkflowInfo:
    """The workflow once it has ended, riding out a control plane that is restarting."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await client.wait_workflow(workflow_id, timeout=5)
        except (ControlPlaneUnavailable, Timeout):
            if time.monotonic() > deadline:
                raise


def test_step_states_compare_equal_to_task_states() -> None:
    # StepState holds every task state: the tests above compare to it alone
    assert StepState.SUCCESS == TaskStatus.SUCCESS  # type: ignore[comparison-overlap]  # the point
