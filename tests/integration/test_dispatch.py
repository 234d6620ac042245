"""Dispatch: the most urgent task first, to the least-loaded subworker."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

from harness import Cluster

from fastworker import Priority


async def test_two_subworkers_each_get_about_half_of_the_work(cluster: Cluster) -> None:
    # Given a control plane that does not run tasks itself, and two equal subworkers
    cluster.control_plane(local_concurrency=0)
    cluster.subworker(concurrency=4)
    cluster.subworker(concurrency=4)
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        # When 80 sleeping tasks are submitted at once
        ids = await client.submit_batch([("nap", (0.05,)) for _ in range(80)])
        results = await asyncio.gather(*(client.wait_result(t) for t in ids))
    # Then each subworker ran within 20% of half of them
    per_worker = Counter(r.worker_id for r in results)
    assert len(per_worker) == 2
    for count in per_worker.values():
        assert 32 <= count <= 48, per_worker


async def test_critical_tasks_submitted_last_finish_before_low_tasks_submitted_first(
    cluster: Cluster,
) -> None:
    # Given one subworker that runs one task at a time
    cluster.control_plane(local_concurrency=0)
    cluster.subworker(concurrency=1)
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        # When a backlog of LOW tasks is queued, then CRITICAL ones
        low = await client.submit_batch(
            [{"task_name": "nap", "args": [0.02, "low"], "priority": "low"}] * 20
        )
        critical = await client.submit_batch(
            [{"task_name": "nap", "args": [0.02, "critical"], "priority": Priority.CRITICAL}] * 5
        )
        low_done = await asyncio.gather(*(client.wait_result(t) for t in low))
        critical_done = await asyncio.gather(*(client.wait_result(t) for t in critical))
    # Then only the LOW task already running when they arrived beats the CRITICAL ones
    last_critical = max(r.finished_at or 0 for r in critical_done)
    low_before = [r for r in low_done if (r.finished_at or 0) < last_critical]
    assert len(low_before) <= 1, [r.task_id for r in low_before]
    assert all(r.priority == "critical" for r in critical_done)


async def test_draining_the_backlog_follows_priority_order(cluster: Cluster) -> None:
    cluster.control_plane(local_concurrency=0)
    async with cluster.client() as client:
        # Given tasks of every priority queued while no subworker exists
        order = [Priority.LOW, Priority.NORMAL, Priority.HIGH, Priority.CRITICAL]
        ids = {
            p: await client.submit_batch(
                [{"task_name": "nap", "args": [0, str(p)], "priority": p}] * 3
            )
            for p in order
        }
        # When a single-slot subworker joins
        cluster.subworker(concurrency=1)
        results = {p: await asyncio.gather(*(client.wait_result(t) for t in ids[p])) for p in order}
    # Then every CRITICAL finished before every HIGH, and so on down
    ranked = sorted(order, key=lambda p: p.rank)
    for higher, lower in itertools.pairwise(ranked):
        assert max(r.finished_at or 0 for r in results[higher]) <= min(
            r.finished_at or 0 for r in results[lower]
        )
