"""The images and the Compose cluster, with a real Docker engine: build both images,
``docker compose up`` deploy/compose/compose.yaml, and drive it from the host through the
mapped ports. Each test has its own project and removes it, leaving nothing behind.

Skipped, saying why, when no engine with compose v2 is reachable; under CI that fails
instead (scripts/docker-engine.sh makes one reachable there).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
from compose_cluster import ROOT, TAG, ComposeCluster, Images, run, skip_without_docker
from harness import wait_until

from fastworker import Client, TaskStatus

pytestmark = pytest.mark.integration

skip_without_docker()


@pytest.fixture
def cluster(images: Images) -> Iterator[ComposeCluster]:
    c = ComposeCluster(images)
    try:
        seconds = c.up()
        print(f"compose cluster {c.project} healthy in {seconds:.1f} s")
        yield c
    except BaseException:
        sys.stderr.write(f"\n--- docker compose logs ({c.project}) ---\n{c.logs()}")
        raise
    finally:
        c.down()
        assert c.leftovers() == []


@pytest.fixture
async def client(cluster: ComposeCluster) -> AsyncIterator[Client]:
    # The announced addresses are the service name (for the containers); from the host
    # the client uses the mapped ports directly.
    async with Client(address=cluster.submission_base, timeout=60) as c:
        yield c


async def subworker_ids(client: Client, count: int, timeout: float = 30) -> set[str]:
    """Wait until ``count`` remote subworkers are registered; their worker ids."""

    async def registered() -> bool:
        return len(await remote_workers(client)) >= count

    await wait_until(registered, timeout, f"{count} subworkers registered")
    return await remote_workers(client)


async def remote_workers(client: Client) -> set[str]:
    return {w.worker_id for w in await client.list_workers() if not w.local}


async def test_a_thousand_tasks_through_the_mapped_ports_all_come_back_from_every_replica(
    cluster: ComposeCluster, client: Client
) -> None:
    replicas = await subworker_ids(client, 3)

    ids = await client.submit_batch(("add", (i, 1)) for i in range(1000))
    results = await client.wait_results(ids, timeout=120)

    assert [r.result for r in results] == [i + 1 for i in range(1000)]
    assert {r.status for r in results} == {TaskStatus.SUCCESS}
    assert replicas <= {r.worker_id for r in results}  # all 3 replicas executed tasks


async def test_scaling_to_five_subworkers_puts_the_new_replicas_to_work_within_10_s(
    cluster: ComposeCluster, client: Client
) -> None:
    before = await subworker_ids(client, 3)

    await asyncio.to_thread(cluster.up, "--scale", "subworker=5")
    new = await subworker_ids(client, 5, timeout=10) - before
    assert len(new) == 2

    async def new_replicas_ran_tasks() -> bool:
        ids = await client.submit_batch(("sleep_for", (0.05,)) for _ in range(40))
        results = await client.wait_results(ids, timeout=30)
        return new <= {r.worker_id for r in results}

    await wait_until(new_replicas_ran_tasks, 10, "tasks run by the 2 new replicas")


async def test_stopping_a_subworker_with_tasks_in_flight_loses_none(
    cluster: ComposeCluster, client: Client
) -> None:
    await subworker_ids(client, 3)
    ids = await client.submit_batch(("sleep_for", (0.5,)) for _ in range(60))

    async def running_somewhere() -> bool:
        return any(w.in_flight for w in await client.list_workers() if not w.local)

    await wait_until(running_somewhere, 10, "tasks in flight on the subworkers")
    victim = cluster.containers("subworker")[0]
    await asyncio.to_thread(run, "docker", "stop", "--time", "40", victim)

    results = await client.wait_results(ids, timeout=120)
    assert {r.status for r in results} == {TaskStatus.SUCCESS}
    assert len(results) == 60


async def test_after_a_control_plane_restart_results_are_kept_and_subworkers_come_back(
    cluster: ComposeCluster, client: Client
) -> None:
    await subworker_ids(client, 3)
    before = await client.submit_task("add", (1, 2))
    later = await client.delay("add", 3, 4, countdown=3600)

    await asyncio.to_thread(cluster.compose, "restart", "control-plane")

    async with Client(address=cluster.submission_base, timeout=60) as fresh:
        after = await subworker_ids(fresh, 3, timeout=60)
        assert len(after) == 3
        result = await fresh.submit_task("add", (20, 22))
        assert result.result == 42
        # The compose file makes the control plane durable: its volume keeps the journal
        kept = await fresh.get_task_result(before.task_id)
        waiting = await fresh.get_task_result(later)
    assert kept is not None
    assert kept.result == 3
    assert waiting is not None
    assert waiting.status == TaskStatus.SCHEDULED


async def test_a_tasks_spans_reach_the_trace_receiver_and_its_series_reach_prometheus(
    cluster: ComposeCluster, client: Client
) -> None:
    await subworker_ids(client, 3)
    result = await client.submit_task("add", (2, 3))
    assert result.result == 5

    async def spans_arrived() -> bool:
        names = await asyncio.to_thread(cluster.span_names, result.task_id)
        return {"dispatch add", "process add"} <= names

    await wait_until(spans_arrived, 30, "the task's dispatch and process spans")

    async def series_scraped() -> bool:
        query = "/api/v1/query?query=sum(fastworker_tasks_succeeded_total)"
        reply = await asyncio.to_thread(cluster.http_json, cluster.prometheus_port, query)
        data = reply["data"]["result"]
        return bool(data) and float(data[0]["value"][1]) >= 1

    await wait_until(series_scraped, 60, "fastworker_ series in Prometheus")
    targets = cluster.http_json(cluster.prometheus_port, "/api/v1/targets")
    jobs = {t["labels"]["job"] for t in targets["data"]["activeTargets"]}
    assert jobs == {"fastworker-control-plane", "fastworker-subworker"}


async def test_a_subworker_image_built_from_the_example_runs_its_own_tasks(
    cluster: ComposeCluster, client: Client
) -> None:
    # Given the example image: FastWorker's subworker plus a package and its dependency
    image = f"fastworker-example-shop:{TAG}"
    await asyncio.to_thread(
        run,
        "docker",
        "build",
        "--build-arg",
        f"FASTWORKER_IMAGE=fastworker-subworker:{TAG}",
        "-t",
        image,
        str(ROOT / "examples" / "custom-image"),
    )
    # When it joins the cluster's network with only the discovery address
    container = (
        await asyncio.to_thread(
            run,
            "docker",
            "run",
            "-d",
            "--network",
            f"{cluster.project}_default",
            "-e",
            "FASTWORKER_DISCOVERY_ADDRESS=tcp://control-plane:5550",
            image,
        )
    ).strip()
    try:
        await subworker_ids(client, 4)
        # Then its tasks run, with the package it installed
        result = await client.submit_task("describe_upload", (3_000_000,))
        assert (result.status, result.result) == (TaskStatus.SUCCESS, "received 3.0 MB")
    finally:
        await asyncio.to_thread(run, "docker", "rm", "-f", container)
