"""Backpressure in a real control plane: past ``--max-queued`` live tasks at a priority,
submissions get ``QueueFull`` at once, memory stays bounded however hard clients push, and
the tasks already accepted all run once capacity arrives."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from harness import Cluster

from fastworker import QueueFull, TaskStatus

BOUND = 2_000
RSS_LIMIT_MIB = 200  # the control plane holding BOUND tasks, after 100,000 refusals


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


async def test_past_the_bound_submissions_get_queue_full_promptly_and_memory_stays_bounded(
    cluster: Cluster,
) -> None:
    # Given a control plane with no capacity yet, filled to its bound at normal priority
    control_plane = cluster.control_plane("--max-queued", str(BOUND), local_concurrency=0)
    async with cluster.client() as client:
        accepted = await client.submit_batch(("add", (i, 1)) for i in range(BOUND))

        # When clients keep pushing
        started = time.monotonic()
        with pytest.raises(QueueFull, match="normal queue is full"):
            await client.delay("add", 1, 1)
        refused_in = time.monotonic() - started
        for _ in range(100):
            with pytest.raises(QueueFull):
                await client.submit_batch(("add", (i, 1)) for i in range(1_000))
        rss = rss_mib(control_plane.pid)
        print(f"queue_full in {refused_in * 1000:.1f} ms; control plane RSS {rss:.0f} MiB")

        # Then refusals are prompt, memory is bounded, and other priorities still flow
        assert refused_in < 1.0
        assert rss < RSS_LIMIT_MIB
        urgent = await client.delay("add", 40, 2, priority="high")

        # And every accepted task runs once a subworker arrives
        cluster.subworker(concurrency=8)
        results = await client.wait_results([*accepted, urgent], timeout=60)
        assert {r.status for r in results} == {TaskStatus.SUCCESS}
        assert [r.result for r in results[:BOUND]] == [i + 1 for i in range(BOUND)]
        assert results[-1].result == 42
        # With the queue drained there is room again
        assert (await client.submit_task("add", (1, 2))).result == 3
