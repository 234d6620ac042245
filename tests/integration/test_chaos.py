"""Subworker chaos: 10,000 tasks while a random subworker is killed with SIGKILL every
second for 10 s and a replacement started each time. Nothing acknowledged is lost; tasks
that ran on a killed worker run again (at least once), and the duplicates stay bounded."""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path

from harness import Cluster

from fastworker import TaskStatus

TASKS = 10_000
KILLS = 10
SUBWORKERS = 3


async def test_killing_a_random_subworker_every_second_loses_no_task(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a control plane that only dispatches, 3 subworkers, and a journal of runs
    cluster.control_plane("--max-redeliveries", "20", local_concurrency=0)
    workers = [cluster.subworker(concurrency=4) for _ in range(SUBWORKERS)]
    runs = tmp_path / "runs"
    runs.mkdir()
    async with cluster.client(timeout=120) as client:
        await cluster.workers(client, SUBWORKERS)
        ids = await client.submit_batch(("mark", (str(runs), i, 0.012)) for i in range(TASKS))

        # When a random subworker is killed every second, and replaced
        rng = random.Random(7)
        for _ in range(KILLS):
            await asyncio.sleep(1.0)  # the chaos schedule itself, not a wait for a condition
            victim = workers.pop(rng.randrange(len(workers)))
            victim.signal(signal.SIGKILL)
            await asyncio.to_thread(victim.wait)
            workers.append(cluster.subworker(concurrency=4))

        # Then every task succeeds
        results = await client.wait_results(ids, timeout=120)

    assert {r.status for r in results} == {TaskStatus.SUCCESS}
    assert [r.result for r in results] == list(range(TASKS))
    ran = [int(p.name.split(".")[0]) for p in runs.iterdir()]
    duplicates = len(ran) - len(set(ran))
    redelivered = sum(1 for r in results if r.attempts > 1)
    print(f"{TASKS} tasks, {KILLS} kills: {redelivered} redelivered, {duplicates} ran twice")
    assert set(ran) == set(range(TASKS))
    # A kill can only repeat what that worker held: at most concurrency + prefetch each.
    assert duplicates <= redelivered
    assert redelivered <= KILLS * 600
