"""What a real control plane keeps under steady load stays bounded: idempotency keys go
with the results they stand for, not at the next periodic sweep."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from harness import Cluster
from test_connections import metric

from fastworker import TaskStatus

pytestmark = pytest.mark.integration

KEPT = 500  # --result-max-size
KEYED = 10_000


async def test_idempotency_keys_of_evicted_results_are_let_go_as_new_ones_come(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    # Given a control plane that keeps 500 results
    cluster.control_plane("--result-max-size", str(KEPT))
    async with cluster.client() as client:
        await cluster.workers(client, 1)

        # When 10,000 tasks, each with its own idempotency key, run in bursts of 500
        last = ""
        for start in range(0, KEYED, 500):
            burst = range(start, start + 500)
            ids = await asyncio.gather(
                *(client.delay("add", i, 1, idempotency_key=f"order-{i}") for i in burst)
            )
            last = ids[-1]
            assert (await client.wait_result(last, timeout=30)).status == TaskStatus.SUCCESS

        # Then the keys held are about the results kept, long before any sweep (every 30 s)
        keys = await metric(http, cluster.http, "fastworker_idempotency_keys")
        assert keys <= 2 * KEPT + 500, f"{keys:.0f} keys held for {KEPT} results"
        # And the newest key still stands for its task
        again = await client.delay("add", KEYED - 1, 1, idempotency_key=f"order-{KEYED - 1}")
        assert again == last
