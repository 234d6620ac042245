"""``fastworker.testing.Cluster``: the real control-plane core and subworker in-process, on a
clock the test moves."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

import fastworker
from fastworker import (
    Client,
    InvalidArguments,
    SyncClient,
    TaskRegistry,
    TaskStatus,
    UnknownTask,
    current_task,
    task,
)
from fastworker.testing import Cluster, ClusterError

registry = TaskRegistry()
ticks: list[float] = []
attempts: list[int] = []
released = threading.Event()


@task(registry=registry)
def add(x: int, y: int) -> int:
    return x + y


@task(registry=registry, cron="0 * * * *")
def hourly() -> None:
    ticks.append(time.monotonic())


@task(registry=registry, max_retries=4, retry_backoff=600, retry_backoff_max=3600)
def flaky() -> int:
    context = current_task()
    assert context is not None
    attempts.append(context.attempt)
    if context.attempt < 5:
        raise ConnectionError("not yet")
    return context.attempt


@task(registry=registry)
async def nap(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@task(registry=registry, time_limit=30)
def real_work(seconds: float) -> str:
    released.wait(seconds)
    return "finished"


@task(registry=registry)
def fan_out(n: int) -> list[str]:
    return [add.delay(i, i) for i in range(n)]


@task(registry=registry)
async def async_fan_out() -> str:
    return add.delay(20, 22)


@task(registry=registry)
async def waits_blocking() -> Any:
    return fastworker.default_client().wait(add.delay(1, 1))


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    ticks.clear()
    attempts.clear()
    released.clear()
    with Cluster(registry, start=datetime(2026, 1, 1, 0, 30, tzinfo=UTC)) as running:
        yield running


@pytest.fixture
def client(cluster: Cluster) -> Iterator[SyncClient]:
    with SyncClient() as started:  # no address: clients find the running cluster
        yield started


def test_a_countdown_task_runs_after_the_clock_reaches_it_and_not_before(
    cluster: Cluster, client: SyncClient
) -> None:
    task_id = client.apply_async(add, (1, 2), countdown=3600)
    assert [r.task_id for r in cluster.queued] == [task_id]
    cluster.advance(3599)
    assert cluster.queued[0].status == TaskStatus.SCHEDULED
    cluster.advance(1)
    assert cluster.results[task_id].result == 3


def test_a_cron_task_ticks_exactly_once_per_hour_over_a_day() -> None:
    start = datetime(2026, 1, 1, 0, 30, tzinfo=UTC)
    with Cluster(registry, start=start, result_ttl=2 * 86400) as cluster:
        ticks.clear()
        cluster.advance(86400)
        assert len(ticks) == 24
        runs = sorted(
            r.submitted_at or 0 for r in cluster.results.values() if r.name == hourly.name
        )
    assert len(runs) == 24
    first_tick = datetime(2026, 1, 1, 1, tzinfo=UTC).timestamp()
    assert [round(t - first_tick) for t in runs] == [3600 * n for n in range(24)]


def test_retries_with_backoff_of_hours_take_no_real_time(
    cluster: Cluster, client: SyncClient
) -> None:
    started, clock = time.monotonic(), cluster.now
    task_id = flaky.delay()
    cluster.drain()
    result = client.get_task_result(task_id)
    assert result is not None
    assert result.status == TaskStatus.SUCCESS
    assert (result.result, result.attempts, attempts) == (5, 5, [1, 2, 3, 4, 5])
    assert cluster.now > clock  # the backoffs were skipped on the clock...
    assert time.monotonic() - started < 30  # ...not waited for (they may sum to hours)


def test_results_expire_after_the_result_ttl() -> None:
    with Cluster(registry, result_ttl=600) as cluster, SyncClient() as client:
        task_id = client.delay(add, 2, 2)
        cluster.drain()
        assert client.wait(task_id) == 4
        cluster.advance(599)
        assert task_id in cluster.results
        cluster.advance(2)
        assert task_id not in cluster.results
        assert client.get_task_result(task_id) is None


def test_a_client_waiting_for_a_result_lets_the_clock_skip(
    cluster: Cluster, client: SyncClient
) -> None:
    task_id = client.apply_async(nap, (1800,), countdown=3600)
    assert client.wait(task_id, timeout=7200) == 1800
    assert cluster.now >= datetime(2026, 1, 1, 2, tzinfo=UTC).timestamp()


def test_time_on_a_thread_is_real_so_a_running_task_is_not_timed_out_by_a_skip(
    cluster: Cluster, client: SyncClient
) -> None:
    task_id = real_work.delay(0.3)  # its 30 s limit must not pass while it runs 0.3 s
    cluster.advance(3600)
    assert client.wait(task_id) == "finished"


def test_the_real_core_checks_names_and_arguments(client: SyncClient) -> None:
    with pytest.raises(InvalidArguments):
        client.delay(add, 1)  # type: ignore[call-overload]
    with pytest.raises(UnknownTask):
        client.delay("no_such_task")


def test_tasks_submitted_from_tasks_run_too(cluster: Cluster, client: SyncClient) -> None:
    children = client.wait(client.delay(fan_out, 5))
    cluster.drain()
    assert [cluster.results[i].result for i in children] == [0, 2, 4, 6, 8]
    child = client.wait(client.delay(async_fan_out))
    cluster.drain()
    assert cluster.results[child].result == 42


def test_a_blocking_wait_inside_an_async_task_is_refused_with_a_clear_error(
    cluster: Cluster, client: SyncClient
) -> None:
    result = client.get_task_result(client.delay(waits_blocking))
    cluster.drain()
    result = client.get_task_result(result.task_id if result else "")
    assert result is not None
    assert result.error is not None
    assert "use the async Client there" in result.error.message


async def test_the_async_client_works_inside_a_cluster(cluster: Cluster) -> None:
    async with Client() as client:
        task_id = await client.apply_async(add, (20, 22), countdown=60)
        assert await client.wait(task_id, timeout=120) == 42


def test_with_no_subworker_tasks_are_accepted_and_wait() -> None:
    with Cluster(registry, workers=0) as cluster, SyncClient() as client:
        task_id = client.delay(add, 1, 2)
        assert [r.task_id for r in cluster.queued] == [task_id]
        with pytest.raises(ClusterError, match="no subworker here"):
            cluster.drain()


def test_advance_refuses_to_go_back_and_a_stopped_cluster_says_so() -> None:
    cluster = Cluster(registry, workers=0)
    with pytest.raises(ClusterError, match="not started"):
        cluster.advance(1)
    with cluster, pytest.raises(ValueError, match="forward"):
        cluster.advance(-1)


def test_drain_gives_up_at_its_bound(cluster: Cluster, client: SyncClient) -> None:
    client.apply_async(add, (1, 1), countdown=7200)
    with pytest.raises(ClusterError, match="still wait"):
        cluster.drain(max_seconds=3600)
