"""A periodic task ticks once per interval however many subworkers could run it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

from harness import Cluster, wait_until

from fastworker import TaskStatus


async def test_a_one_second_task_with_two_subworkers_runs_once_per_tick(
    cluster: Cluster,
) -> None:
    cluster.spawn(
        "control-plane",
        "control-plane",
        "--task-modules",
        "it_tasks",
        "it_periodic",
        "--base-port",
        str(cluster.base_port),
        "--discovery-port",
        str(cluster.discovery_port),
        "--local-concurrency",
        "0",
    )
    for _ in range(2):
        cluster.spawn(
            "subworker",
            "subworker",
            "--task-modules",
            "it_tasks",
            "it_periodic",
            "--discovery-address",
            cluster.discovery,
        )
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        started = time.monotonic()

        async def five_runs() -> bool:
            [schedule] = await client.list_schedules()
            return schedule.times_run >= 5

        await wait_until(five_runs, timeout=15, what="five ticks")
        elapsed = time.monotonic() - started
        runs = [
            t for t in await client.list_tasks(limit=1000) if t.name == "it_periodic.every_second"
        ]
        [schedule] = await client.list_schedules()
    assert 3.5 <= elapsed <= 7.0
    assert schedule.spec == "every 1 s"
    assert schedule.times_run <= 6  # not 10: one run per tick, not one per subworker
    assert len(runs) == schedule.times_run
    assert {r.status for r in runs} <= {
        TaskStatus.SUCCESS,
        TaskStatus.RUNNING,
        TaskStatus.QUEUED,
        TaskStatus.ASSIGNED,
    }
    assert len({r.worker_id for r in runs if r.worker_id}) <= 2


async def test_the_schedules_command_lists_periodic_tasks(cluster: Cluster) -> None:
    cluster.spawn(
        "control-plane",
        "control-plane",
        "--task-modules",
        "it_tasks",
        "it_periodic",
        "--base-port",
        str(cluster.base_port),
        "--discovery-port",
        str(cluster.discovery_port),
    )
    async with cluster.client() as client:
        await client.list_workers()
    done = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "fastworker.cli",
            "schedules",
            "--discovery-address",
            cluster.discovery,
        ],
        capture_output=True,
        text=True,
        env=cluster.env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()[:2]
    assert header.split()[:2] == ["TASK", "SCHEDULE"]
    assert row.startswith("it_periodic.every_second")  # named by its task
    assert "every 1 s" in row
