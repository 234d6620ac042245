"""Named queues, worker pools and limits with real processes: dispatch no backlog can
block, pools that serve only their own queues, weighted fair share, exact global rate and
per-key concurrency limits, pause/resume/purge from the CLI, and controls kept across a
control-plane restart."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from itertools import combinations, pairwise
from pathlib import Path
from typing import Any

from harness import Cluster, Proc, wait_until

from fastworker import Client
from fastworker_protocol import TaskResult, TaskState


def control_plane(cluster: Cluster, *extra: str) -> Proc:
    """A control plane that knows the queue tasks and runs none itself."""
    return cluster.spawn(
        "control-plane",
        "control-plane",
        "--task-modules",
        "it_queues",
        "--base-port",
        str(cluster.base_port),
        "--discovery-port",
        str(cluster.discovery_port),
        "--local-concurrency",
        "0",
        *extra,
    )


def pool(cluster: Cluster, queues: str, concurrency: int = 4, *, by_env: bool = False) -> Proc:
    """A subworker serving ``queues`` (given as FASTWORKER_QUEUES with ``by_env``)."""
    args = ["--task-modules", "it_queues", "--discovery-address", cluster.discovery]
    args += ["--concurrency", str(concurrency)]
    if by_env:
        return cluster.spawn(
            f"pool-{queues}", "subworker", *args, env=cluster.env(FASTWORKER_QUEUES=queues)
        )
    return cluster.spawn(f"pool-{queues}", "subworker", *args, "--queues", queues)


async def fastworker(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "fastworker.cli",
        *args,
        "--discovery-address",
        cluster.discovery,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=cluster.env(),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return subprocess.CompletedProcess(args, proc.returncode, out.decode(), err.decode())


def ran(results: list[TaskResult]) -> list[dict[str, Any]]:
    assert all(r.status == TaskState.SUCCESS for r in results), results
    return [r.result for r in results]


async def statuses(client: Client, ids: list[str]) -> Counter[TaskState]:
    return Counter(r.status for r in [await client.get_task_result(t) for t in ids] if r)


async def test_a_hundred_thousand_tasks_no_worker_can_run_do_not_delay_a_hundred_others(
    cluster: Cluster,
) -> None:
    # Given 100,000 tasks queued in "reports", which no connected worker serves
    control_plane(cluster)
    pool(cluster, "default", concurrency=8)
    async with cluster.client(timeout=60) as client:
        await cluster.workers(client, 1)
        backlog = await client.submit_batch([("build_report", (n,)) for n in range(100_000)])
        assert len(backlog) == 100_000
        # When 100 tasks the worker does run are submitted behind them
        started = time.monotonic()
        ids = await client.submit_batch([("send_email", (n,)) for n in range(100)])
        results = await client.wait_results(ids, timeout=20)
        took = time.monotonic() - started
        queues = {q.name: q for q in await client.list_queues()}
    # Then they all ran in well under a second, and the backlog is still queued
    assert [r["n"] for r in ran(results)] == list(range(100))
    assert took < 1.0, f"100 tasks took {took:.2f} s behind a 100,000-task backlog"
    assert sum(queues["reports"].depth.values()) == 100_000
    assert queues["reports"].workers == 0


async def test_two_pools_each_run_only_their_own_queues(cluster: Cluster) -> None:
    # Given a "reports" pool and a default pool (its queues from FASTWORKER_QUEUES)
    control_plane(cluster)
    reports, default = pool(cluster, "reports"), pool(cluster, "default", by_env=True)
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        # When tasks of both queues are submitted, one moved to the other queue by the caller
        report_ids = await client.submit_batch([("build_report", (n,)) for n in range(50)])
        email_ids = await client.submit_batch([("send_email", (n,)) for n in range(50)])
        moved = await client.delay("send_email", 99, queue="reports")
        report_runs = ran(await client.wait_results([*report_ids, moved], timeout=20))
        email_runs = ran(await client.wait_results(email_ids, timeout=20))
        workers = {w.worker_id: w.queues for w in await client.list_workers()}
    # Then each ran only in its own pool
    assert {r["pid"] for r in report_runs} == {reports.pid}
    assert {r["pid"] for r in email_runs} == {default.pid}
    assert sorted(workers.values(), key=str) == [{"default": 1}, {"reports": 1}]


async def test_a_worker_shares_itself_between_its_queues_by_their_weights(
    cluster: Cluster,
) -> None:
    # Given 1,000 tasks queued in each of two queues before any worker is there
    control_plane(cluster)
    async with cluster.client() as client:
        reports = await client.submit_batch([("build_report", (n,)) for n in range(1000)])
        emails = await client.submit_batch([("send_email", (n,)) for n in range(1000)])
        # When one single-slot worker serves them with weights 1:4
        pool(cluster, "reports:1,default:4", concurrency=1)
        results = await client.wait_results([*reports, *emails], timeout=60)
    # Then while both had work (the first 1,000 starts), default got 4 of every 5 (+-10%)
    first = sorted(results, key=lambda r: r.result["start"])[:1000]
    share = sum(1 for r in first if r.name == "it_queues.send_email") / len(first)
    assert 0.72 <= share <= 0.88, f"default's share was {share:.2f}, its weight 0.8"


async def test_a_rate_limit_holds_over_two_subworkers(cluster: Cluster) -> None:
    # Given call_api limited to 10/s, and two subworkers
    control_plane(cluster)
    pool(cluster, "default")
    pool(cluster, "default")
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        # When 40 calls are queued at once
        ids = await client.submit_batch([("call_api", (n,)) for n in range(40)])
        runs = ran(await client.wait_results(ids, timeout=30))
    # Then no second saw more starts than the bucket allows (10 a second + a burst of 1),
    # both subworkers took part, and the whole took the time the rate says
    starts = sorted(r["start"] for r in runs)
    busiest = max(sum(1 for s in starts if first <= s < first + 1.0) for first in starts)
    assert busiest <= 11, f"{busiest} starts within one second"
    assert starts[-1] - starts[0] >= 3.5
    assert len({r["pid"] for r in runs}) == 2


async def test_one_run_per_key_at_a_time_over_three_subworkers(cluster: Cluster) -> None:
    # Given import_customer limited to one run per customer, and three subworkers
    control_plane(cluster)
    for _ in range(3):
        pool(cluster, "default")
    async with cluster.client() as client:
        await cluster.workers(client, 3)
        # When five imports of each of four customers are queued at once
        calls = [(c, 0.1) for _ in range(5) for c in "abcd"]
        ids = await client.submit_batch([("import_customer", call) for call in calls])
        runs = ran(await client.wait_results(ids, timeout=30))
    # Then no two runs of one customer overlapped, and runs of different customers did
    by_customer: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        by_customer.setdefault(run["customer"], []).append((run["start"], run["end"]))
    for customer, spans in by_customer.items():
        spans.sort()
        for (_, end), (start, _) in pairwise(spans):
            assert start >= end, f"two runs of {customer} overlapped"
    overlapping = [
        (a, b)
        for a, b in combinations(runs, 2)
        if a["customer"] != b["customer"] and a["start"] < b["end"] and b["start"] < a["end"]
    ]
    assert overlapping, "different customers never ran at the same time"


async def test_pause_resume_and_purge_from_the_command_line(cluster: Cluster) -> None:
    # Given a worker serving "reports" and "default", and "reports" paused
    control_plane(cluster)
    pool(cluster, "reports,default")
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        paused = await fastworker(cluster, "queue", "pause", "reports")
        assert (paused.returncode, paused.stdout.strip()) == (0, "queue reports paused")
        # When tasks of both queues are submitted
        reports = await client.submit_batch([("build_report", (n,)) for n in range(5)])
        emails = await client.submit_batch([("send_email", (n,)) for n in range(5)])
        ran(await client.wait_results(emails, timeout=20))
        # Then only the paused queue's tasks are still queued, and the listing says so
        assert await statuses(client, reports) == {TaskState.QUEUED: 5}
        listed = await fastworker(cluster, "queues", "--json")
        queues = {q["name"]: q for q in json.loads(listed.stdout)}
        assert (queues["reports"]["paused"], queues["reports"]["depth"]["normal"]) == (True, 5)
        assert queues["default"]["paused"] is False
        # And resuming runs them
        assert (await fastworker(cluster, "queue", "resume", "reports")).returncode == 0
        ran(await client.wait_results(reports, timeout=20))
        # When "reports" is paused again with new tasks, and a queue nobody serves has some
        await fastworker(cluster, "queue", "pause", "reports")
        doomed = await client.submit_batch([("build_report", (n,)) for n in range(4)])
        elsewhere = await client.delay("send_email", 1, queue="nobody")
        refused = await fastworker(cluster, "queue", "purge", "reports")
        purged = await fastworker(cluster, "queue", "purge", "reports", "--yes")
        # Then purge asked for confirmation first, and cancelled only that queue's tasks
        assert refused.returncode != 0
        assert "--yes" in refused.stderr
        assert purged.stdout.strip() == "queue reports purged: 4 tasks cancelled"
        assert await statuses(client, doomed) == {TaskState.CANCELLED: 4}
        assert await statuses(client, [elsewhere]) == {TaskState.QUEUED: 1}


async def test_limits_and_pauses_survive_a_control_plane_restart(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a control plane with a state dir, a queue limited and another paused at run time
    state = tmp_path / "state"
    plane = control_plane(cluster, "--state-dir", str(state))
    async with cluster.client() as client:
        await wait_until(_answers(client), 20, "the control plane to answer")
        limited = await fastworker(cluster, "queue", "limit", "reports", "--rate", "5/s")
        assert limited.stdout.strip() == "queue reports: rate 5/s", limited
        await fastworker(cluster, "task-limit", "send_email", "--concurrency", "2")
        await fastworker(cluster, "queue", "pause", "bulk")
    # When it restarts from its state dir
    plane.stop()
    control_plane(cluster, "--state-dir", str(state))
    # Then the limits and the pause are in effect again
    async with cluster.client() as client:
        await wait_until(_answers(client), 20, "the restarted control plane to answer")
        limits = {(li.scope, li.name): li for li in await client.list_limits()}
        queues = {q.name: q for q in await client.list_queues()}
    assert limits[("queue", "reports")].rate_limit == "5/s"
    assert limits[("task", "it_queues.send_email")].concurrency_limit == 2
    assert limits[("queue", "reports")].overridden
    assert limits[("task", "it_queues.send_email")].overridden
    assert not limits[("task", "it_queues.call_api")].overridden  # declared by @task, not set
    assert queues["bulk"].paused


def _answers(client: Client) -> Any:
    async def answers() -> bool:
        try:
            await client.list_queues()
        except Exception:  # still starting
            return False
        return True

    return answers
