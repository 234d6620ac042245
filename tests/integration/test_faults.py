"""Faults: lost subworkers lose no tasks; SIGTERM drains and exits."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from harness import Cluster, wait_until

from fastworker import Client, TaskStatus


async def _holding(client: Client, worker_pid: int, at_least: int = 1) -> bool:
    workers = await client.list_workers()
    return any(w.name.endswith(f":{worker_pid}") and w.in_flight >= at_least for w in workers)


async def test_kill_9_of_a_subworker_holding_tasks_loses_none_of_them(cluster: Cluster) -> None:
    # Given two subworkers sharing 24 half-second tasks
    cluster.control_plane(local_concurrency=0)
    victim = cluster.subworker(concurrency=4)
    survivor = cluster.subworker(concurrency=4)
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        ids = await client.submit_batch([("nap", (0.5, i)) for i in range(24)])
        await wait_until(lambda: _holding(client, victim.pid), what="the victim to hold tasks")
        # When one of them is killed outright
        victim.popen.kill()
        victim.wait()
        results = await asyncio.gather(*(client.wait_result(t, timeout=30) for t in ids))
    # Then every task still succeeds, the victim's ones on the survivor
    assert [r.status for r in results] == [TaskStatus.SUCCESS] * 24
    assert sorted(r.result["tag"] for r in results) == list(range(24))
    redelivered = [r for r in results if r.attempts > 1]
    assert redelivered, "the victim held tasks, so some must have been delivered twice"
    assert {r.result["pid"] for r in redelivered} == {survivor.pid}


async def test_sigterm_lets_a_subworker_finish_its_tasks_then_exit(cluster: Cluster) -> None:
    cluster.control_plane(local_concurrency=0)
    worker = cluster.subworker(concurrency=2)
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        ids = [await client.delay("nap", 1.0, i) for i in range(2)]
        # Both held: a SIGTERM between the two dispatches would leave one queued, unrun
        await wait_until(lambda: _holding(client, worker.pid, 2), what="the worker to hold both")
        worker.signal(signal.SIGTERM)
        results = await asyncio.gather(*(client.wait_result(t) for t in ids))
        assert worker.wait(timeout=10) == 0
        assert [r.status for r in results] == [TaskStatus.SUCCESS] * 2
        assert {r.attempts for r in results} == {1}
        assert await client.list_workers() == []
    assert "draining" in worker.output()


async def test_tasks_past_the_shutdown_timeout_are_cancelled_and_delivered_again(
    cluster: Cluster,
) -> None:
    cluster.control_plane(local_concurrency=0)
    first = cluster.subworker("--shutdown-timeout", "0.2", concurrency=1)
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        task_id = await client.delay("nap", 3.0, "long")
        await wait_until(lambda: _holding(client, first.pid), what="the task to start")
        stopped_at = time.monotonic()
        first.signal(signal.SIGTERM)
        assert first.wait(timeout=10) == 0
        assert time.monotonic() - stopped_at < 3.0, "the drain must not wait for the task"
        second = cluster.subworker(concurrency=1)
        result = await client.wait_result(task_id, timeout=20)
    assert result.status == TaskStatus.SUCCESS
    assert result.result["pid"] == second.pid
    assert result.attempts == 2


async def test_sigterm_stops_a_busy_control_plane_promptly(cluster: Cluster) -> None:
    plane = cluster.control_plane("--shutdown-timeout", "1")
    async with cluster.client() as client:
        await client.submit_batch([("nap", (0.2,)) for _ in range(50)])
    started = time.monotonic()
    plane.signal(signal.SIGTERM)
    assert plane.wait(timeout=10) == 0
    assert time.monotonic() - started < 5.0


async def test_tasks_finished_while_the_control_plane_was_frozen_past_its_heartbeats_run_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a subworker running four 2 s tasks for a control plane with a 1 s heartbeat timeout
    plane = cluster.control_plane("--heartbeat-timeout", "1", local_concurrency=0)
    cluster.subworker(concurrency=4)
    marks = tmp_path / "marks"
    marks.mkdir()
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        ids = [await client.delay("mark", str(marks), i, 2.0) for i in range(4)]
        await wait_until(lambda: _all_running(client, ids), what="the four tasks to run")
        # When the control plane freezes until they have finished (longer than its heartbeat
        # timeout, so it expels the worker when it wakes: unknown_worker), then wakes
        plane.signal(signal.SIGSTOP)
        try:

            async def all_marked() -> bool:
                return len(list(marks.iterdir())) >= len(ids)

            await wait_until(all_marked, 10, "the four tasks to finish")
        finally:
            plane.signal(signal.SIGCONT)
        results = await client.wait_results(ids, timeout=30)
    # Then their outcomes were kept, handed over after registering again, and accepted:
    # each task ran exactly once
    assert [r.status for r in results] == [TaskStatus.SUCCESS] * 4
    assert Counter(p.name.split(".")[0] for p in marks.iterdir()) == Counter("0123")


async def _all_running(client: Client, ids: Sequence[str]) -> bool:
    results = [await client.get_task_result(t) for t in ids]
    return all(r is not None and r.status == TaskStatus.RUNNING for r in results)


async def test_a_draining_subworker_expelled_meanwhile_still_hands_over_its_outcomes(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a subworker running a 2 s task for a control plane with a 1 s heartbeat timeout,
    # and no other worker to run it again
    cluster.control_plane("--heartbeat-timeout", "1", local_concurrency=0)
    worker = cluster.subworker("--shutdown-timeout", "30", concurrency=1)
    marks = tmp_path / "marks"
    marks.mkdir()
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        [task_id] = [await client.delay("mark", str(marks), 0, 2.0)]
        await wait_until(lambda: _all_running(client, [task_id]), what="the task to run")
        # When it is told to drain, then frozen until the control plane expels it
        worker.signal(signal.SIGTERM)

        async def draining() -> bool:
            return [w.state for w in await client.list_workers()] == ["draining"]

        await wait_until(draining, what="the subworker to drain")
        worker.signal(signal.SIGSTOP)
        try:

            async def expelled() -> bool:
                return not await client.list_workers()

            await wait_until(expelled, what="the control plane to expel it")
        finally:
            worker.signal(signal.SIGCONT)
        # Then it registers again just to hand over the outcome: the task ran once
        result = await client.wait_result(task_id, timeout=30)
    assert (result.status, result.attempts) == (TaskStatus.SUCCESS, 1)
    assert [p.name.split(".")[0] for p in marks.iterdir()] == ["0"]
    assert worker.wait() == 0
