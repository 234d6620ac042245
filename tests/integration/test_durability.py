"""The durable control plane (``--state-dir``): what was acknowledged survives a crash.

The crash test kills the control plane with SIGKILL in the middle of a stream of
submissions and starts it again on the same journal: every task whose submission was
acknowledged reaches a final state and its result can be read."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from harness import Cluster, Proc, wait_until

from fastworker import ControlPlaneUnavailable, TaskStatus, Timeout

TASKS = 20_000
BATCH = 500
KILL_AFTER = 6_000  # acknowledged tasks before the crash


async def test_a_control_plane_killed_mid_stream_finishes_every_acknowledged_task(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a durable control plane that only dispatches, two subworkers, a record of runs
    state = tmp_path / "state"
    runs = tmp_path / "runs"
    runs.mkdir()

    def start() -> Proc:
        return cluster.control_plane("--state-dir", str(state), local_concurrency=0)

    plane = start()
    cluster.subworker(concurrency=8)
    cluster.subworker(concurrency=8)
    acked: dict[str, int] = {}  # task id -> the index it marks
    unacked = 0
    async with cluster.client(timeout=5, retries=1) as client:
        await cluster.workers(client, 2)

        async def submit_all() -> None:
            nonlocal unacked
            for start_at in range(0, TASKS, BATCH):
                batch = [("mark", (str(runs), i, 0.001)) for i in range(start_at, start_at + BATCH)]
                try:
                    ids = await client.submit_batch(batch)
                    acked.update(zip(ids, range(start_at, start_at + BATCH), strict=True))
                except (ControlPlaneUnavailable, Timeout):
                    unacked += BATCH  # never acknowledged: the test claims nothing for them

        submitter = asyncio.create_task(submit_all())

        # When the control plane is killed mid-stream and started again on its journal
        async def enough_acknowledged() -> bool:
            return len(acked) >= KILL_AFTER

        await wait_until(enough_acknowledged, 60, f"{KILL_AFTER} acknowledged tasks")
        plane.signal(signal.SIGKILL)
        await asyncio.to_thread(plane.wait)
        start()
        await submitter
        await cluster.workers(client, 2, timeout=30)

        # Then every acknowledged task finishes, and its result can be read
        results = await client.wait_results(list(acked), timeout=180)

    assert {r.status for r in results} == {TaskStatus.SUCCESS}
    assert [r.result for r in results] == list(acked.values())
    ran = {int(p.name.split(".")[0]) for p in runs.iterdir()}
    assert set(acked.values()) <= ran
    redelivered = sum(1 for r in results if r.attempts > 1)
    print(
        f"{len(acked)} acknowledged, {unacked} unacknowledged around the crash; "
        f"{redelivered} redelivered after the restart"
    )
    assert len(acked) >= KILL_AFTER


async def test_results_and_queued_tasks_survive_a_clean_restart(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a durable control plane with one finished task and one delayed far ahead
    state = tmp_path / "state"
    plane = cluster.control_plane("--state-dir", str(state))
    async with cluster.client() as client:
        done = await client.submit_task("add", args=(2, 3))
        later = await client.delay("add", 1, 1, countdown=3600)
    # When it is stopped and started again
    plane.stop()
    cluster.control_plane("--state-dir", str(state))
    # Then both are still there
    async with cluster.client() as client:
        kept = await client.get_task_result(done.task_id)
        waiting = await client.get_task_result(later)
    assert kept is not None
    assert kept.status == TaskStatus.SUCCESS
    assert kept.result == 5
    assert waiting is not None
    assert waiting.status == TaskStatus.SCHEDULED


async def test_a_second_control_plane_on_the_same_state_dir_is_refused(
    cluster: Cluster, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    cluster.control_plane("--state-dir", str(state))
    async with cluster.client() as client:
        await cluster.workers(client, 1)
    other = Cluster(tmp_path / "other")
    (tmp_path / "other").mkdir()
    try:
        second = other.control_plane("--state-dir", str(state))
        assert await asyncio.to_thread(second.wait) == 2
        assert "in use by another control plane" in second.output()
    finally:
        other.stop()


async def test_a_periodic_schedule_keeps_counting_across_a_restart(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a durable control plane whose one-second task has run twice
    state = tmp_path / "state"

    def start() -> Proc:
        modules = ("--task-modules", "it_tasks", "it_periodic")
        return cluster.control_plane(*modules, "--state-dir", str(state))

    plane = start()
    async with cluster.client() as client:

        async def ran_twice() -> bool:
            return [s.times_run for s in await client.list_schedules()] >= [2]

        await wait_until(ran_twice, 20, "two ticks")
    # When it restarts
    plane.stop()
    start()
    async with cluster.client() as client:
        [schedule] = await client.list_schedules()
        before = schedule.times_run
        # Then its count goes on from where it was, and it keeps ticking
        assert before >= 2

        async def ticked_again() -> bool:
            [now] = await client.list_schedules()
            return now.times_run > before

        await wait_until(ticked_again, 20, "a tick after the restart")
