"""The pytest plugin the SDK installs: its fixtures, used from a user's own test file."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = """
import fastworker
from fastworker import TaskStatus, current_task, task

@task
def double(x: int) -> int:
    return 2 * x

@task(max_retries=2, retry_backoff=300)
def flaky() -> int:
    attempt = current_task().attempt
    if attempt < 3:
        raise ConnectionError(attempt)
    return attempt

def test_eager_records_what_the_code_submitted(fastworker_eager):
    assert fastworker.default_client().wait(double.delay(21)) == 42
    assert [s.args for s in fastworker_eager.submitted(double)] == [[21]]

def test_the_cluster_keeps_time(fastworker_cluster, fastworker_client):
    task_id = fastworker_client.apply_async(double, (4,), countdown=600)
    fastworker_cluster.advance(599)
    assert fastworker_client.get_task_result(task_id).status == TaskStatus.SCHEDULED
    fastworker_cluster.advance(1)
    assert fastworker_client.wait(task_id) == 8

def test_retries_in_the_cluster(fastworker_client, fastworker_cluster):
    task_id = flaky.delay()
    fastworker_cluster.drain()
    assert fastworker_client.wait(task_id) == 3

def test_a_client_alone_runs_eagerly(fastworker_client):
    assert fastworker_client.wait(fastworker_client.delay(double, 5)) == 10

@task
def total(values: list) -> int:
    return sum(values)

def test_the_cluster_runs_workflows(fastworker_cluster, fastworker_client):
    item = fastworker.chord([double.s(i) for i in range(5)], total.s())
    workflow_id = fastworker_client.submit_workflow(item)
    fastworker_cluster.drain()
    info = fastworker_client.wait_workflow(workflow_id)
    assert info.state == "success"
    assert fastworker_client.wait(info.steps[-1].task_id) == 20

def test_handles_in_eager_mode(fastworker_eager):
    handle = double.delay(21)
    assert handle.get() == 42
    assert handle.status() == TaskStatus.SUCCESS
    assert handle.ready()
    assert not handle.cancel()  # it has ended

def test_a_workflow_handle_in_the_cluster(fastworker_cluster, fastworker_client):
    handle = fastworker.chord([double.s(i) for i in range(5)], total.s()).delay()
    step = double.delay(7)
    assert not step.ready()
    fastworker_cluster.drain()
    assert handle.get() == 20
    assert step.get() == 14

def test_eager_refuses_workflows(fastworker_eager):
    import pytest
    with pytest.raises(fastworker.RequestRejected, match="fastworker_cluster"):
        (double.s(1) | double.s()).delay()
"""


def test_the_fixtures_work_in_a_users_test_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=8)
