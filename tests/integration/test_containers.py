"""The images and the Compose cluster, with a real Docker engine: build both images,
``docker compose up`` deploy/compose/compose.yaml, and drive it from the host through the
mapped ports. Each test has its own project and removes it, leaving nothing behind.

Skipped, saying why, when no engine with compose v2 is reachable; under CI that fails
instead (scripts/docker-engine.sh makes one reachable there).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from compose_cluster import (
    LOCAL_BASE,
    ROOT,
    TAG,
    ComposeCluster,
    Images,
    run,
    skip_without_docker,
)
from harness import wait_until

from fastworker import Client, TaskStatus
from fastworker.testing import free_port_block

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


async def test_the_reports_pool_alone_runs_the_reports_queue(
    cluster: ComposeCluster, client: Client
) -> None:
    # Given the cluster with its second pool (the profile the compose file documents)
    await asyncio.to_thread(
        cluster.compose,
        "--profile",
        "reports",
        "up",
        "-d",
        "--no-build",
        "--wait",
        "--wait-timeout",
        "120",
    )
    try:
        await subworker_ids(client, 4)
        [container] = cluster.containers("subworker-reports")
        host = cluster.hostname(container)
        pool = {w.worker_id for w in await client.list_workers() if w.queues == {"reports": 1}}
        # When reports and default-queue tasks are submitted
        reports = await client.submit_batch(("build_report", (n,)) for n in range(20))
        adds = await client.submit_batch(("add", (n, 1)) for n in range(20))
        report_runs = await client.wait_results(reports, timeout=60)
        add_runs = await client.wait_results(adds, timeout=60)
    finally:
        await asyncio.to_thread(cluster.compose, "--profile", "reports", "down", "-t", "10")
    # Then every report ran on the reports pool, and no other task did
    assert [r.result for r in report_runs] == list(range(20))
    assert {r.worker_id for r in report_runs} == pool
    assert len(pool) == 1
    assert next(iter(pool)).startswith(host)  # its worker id starts with its hostname
    assert not pool & {r.worker_id for r in add_runs}


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

    async with Client(address=cluster.submission_base, timeout=60, connect_timeout=60) as fresh:
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
        return {"dispatch tasks.add", "process tasks.add"} <= names  # module-qualified

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


# --- the README's offline path, verbatim ---------------------------------------------------

README = ROOT / "README.md"
OFFLINE_IMAGES = ("control-plane", "subworker", "otlp-receiver", "prometheus")


def readme_offline_commands() -> list[str]:
    """The ``docker compose`` lines of the README's "No registry?" block, as written."""
    text = README.read_text()
    block = text[text.index("**No registry?**") :]
    block = block[block.index("```bash\n") + len("```bash\n") :]
    block = block[: block.index("```")]
    return [line for line in block.splitlines() if line.startswith("docker compose ")]


def test_the_readme_offline_block_passes_both_compose_files_to_up_scale_and_down() -> None:
    commands = readme_offline_commands()
    files = "-f deploy/compose/compose.yaml -f deploy/compose/compose.offline.yaml "
    assert [c.split(files)[1].split("#")[0].strip() for c in commands] == [
        "up --build -d",
        "up -d --scale subworker=5",
        "down",
    ]


def _remove_images(tag: str) -> None:
    for name in OFFLINE_IMAGES:
        subprocess.run(
            ["docker", "image", "rm", "-f", f"fastworker-{name}:{tag}"],
            capture_output=True,
            check=False,
        )


async def test_the_readme_offline_commands_run_verbatim_pulling_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given the base the README's first step builds, and none of the images the commands
    # build (a tag of this test's own), on free host ports and in a project of its own: the
    # commands are the README's lines as written; only the environment differs.
    if not _image_exists(LOCAL_BASE):
        run(str(ROOT / "deploy" / "build-base-image.sh"), LOCAL_BASE, timeout=900)
    suffix = uuid.uuid4().hex[:8]
    project, tag = f"fwreadme-{suffix}", f"readme-{suffix}"
    base, http, otlp, prometheus = (free_port_block(11), *(free_port_block(1) for _ in "xyz"))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FASTWORKER_", "COMPOSE_")) and k != "BASE_IMAGE"
    }
    env.update(
        COMPOSE_PROJECT_NAME=project,
        FASTWORKER_TAG=tag,
        FASTWORKER_PORTS=f"{base}-{base + 10}",
        FASTWORKER_HTTP_PORT=str(http),
        JAEGER_UI_PORT=str(free_port_block(1)),
        OTLP_GRPC_PORT=str(free_port_block(1)),
        OTLP_HTTP_PORT=str(otlp),
        PROMETHEUS_PORT=str(prometheus),
    )
    up, scale, down = readme_offline_commands()
    _remove_images(tag)
    timings: dict[str, float] = {}

    def timed(command: str, timeout: float) -> str:
        started = time.monotonic()
        done = subprocess.run(
            shlex.split(command, comments=True),
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        timings[command] = time.monotonic() - started
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{command} exited {done.returncode}:\n{output[-4000:]}"
        assert "Pulling" not in output
        assert "pull access denied" not in output
        return output

    try:
        # When the README's up runs
        await asyncio.to_thread(timed, up, 1800)
        sizes = {
            name: int(run("docker", "image", "inspect", "--format", "{{.Size}}", image).strip())
            for name in ("control-plane", "subworker")
            for image in [f"fastworker-{name}:{tag}"]
        }
        # Then the cluster serves: three subworkers run tasks, the stand-ins answer
        async with Client(address=f"tcp://127.0.0.1:{base + 5}", timeout=60) as client:
            await subworker_ids(client, 3, timeout=120)
            result = await client.submit_task("add", (5, 3))
            assert result.result == 8

            async def stand_ins_up() -> bool:
                try:
                    spans = await asyncio.to_thread(_http_json, otlp, "/spans")
                    ready = await asyncio.to_thread(_http_status, prometheus, "/-/ready")
                except OSError:
                    return False
                return isinstance(spans, list) and ready == 200

            await wait_until(stand_ins_up, 60, "the OTLP receiver and Prometheus")
            # And the README's scale brings five subworkers, with no image pulled
            await asyncio.to_thread(timed, scale, 300)
            assert len(await subworker_ids(client, 5, timeout=60)) == 5
            # And the README's down removes the containers
        await asyncio.to_thread(timed, down, 300)
        label = f"label=com.docker.compose.project={project}"
        assert run("docker", "ps", "-aq", "--filter", label).split() == []
        # The sizes the README gives (docker image inspect .Size, MB of 10^6 bytes)
        stated = re.search(
            r"the control-plane image is (\d+) MB and the subworker image (\d+) MB",
            " ".join(README.read_text().split()),
        )
        assert stated is not None
        for name, said in zip(("control-plane", "subworker"), stated.groups(), strict=True):
            assert abs(sizes[name] / 1e6 - int(said)) <= 5, (name, sizes[name] / 1e6, said)
        with capsys.disabled():
            for command, seconds in timings.items():
                print(f"\n{seconds:6.1f} s  {command}")
            print("image sizes (MB):", {k: round(v / 1e6, 1) for k, v in sizes.items()})
    finally:
        await asyncio.to_thread(_clean_up, down, env, project, tag)


def _clean_up(down: str, env: dict[str, str], project: str, tag: str) -> None:
    """Whatever the README's commands made, by name: the project, its volume, its images."""
    subprocess.run(
        [*shlex.split(down, comments=True), "-v", "--remove-orphans", "-t", "5"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    _remove_images(tag)
    for kind, name in (("volume", "control-plane-state"), ("network", "default")):
        subprocess.run(
            ["docker", kind, "rm", f"{project}_{name}"], capture_output=True, check=False
        )


def _image_exists(image: str) -> bool:
    done = subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False)
    return done.returncode == 0


def _http_json(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
        return json.loads(reply.read())


def _http_status(port: int, path: str) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
        return int(reply.status)
