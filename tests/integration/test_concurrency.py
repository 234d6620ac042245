"""Many requests in flight on many clients: every caller gets its own reply.

The published FastWorker 0.3 served REP sockets without NNG contexts; with 64 requests in
flight, hundreds of 2,000 callers received another task's result. These tests are that
scenario.
"""

from __future__ import annotations

import asyncio

from harness import Cluster

from fastworker import Client


async def test_eight_clients_with_64_requests_each_in_flight_all_get_their_own_results(
    cluster: Cluster,
) -> None:
    cluster.control_plane()
    clients = [cluster.client() for _ in range(8)]
    try:
        await asyncio.gather(*(c.start() for c in clients))

        async def burst(n: int, client: Client) -> list[tuple[object, object]]:
            tags = [f"client{n}-request{i}" for i in range(64)]
            results = await asyncio.gather(
                *(client.submit_task("echo", args=(tag,)) for tag in tags)
            )
            return [(tag, r.result) for tag, r in zip(tags, results, strict=True)]

        pairs = await asyncio.gather(*(burst(n, c) for n, c in enumerate(clients)))
    finally:
        for c in clients:
            c.stop()
    mismatched = [(want, got) for batch in pairs for want, got in batch if want != got]
    assert mismatched == []
    assert sum(len(batch) for batch in pairs) == 512


async def test_fire_and_forget_ids_fetched_concurrently_match_their_tasks(
    client: Client,
) -> None:
    ids = await asyncio.gather(*(client.delay("echo", i) for i in range(300)))
    assert len(set(ids)) == 300
    results = await asyncio.gather(*(client.wait_result(t) for t in ids))
    assert [r.result for r in results] == list(range(300))
    assert [r.task_id for r in results] == ids


async def test_a_batch_stores_each_result_under_its_own_task(client: Client) -> None:
    items = [("add", (i, 1000)) for i in range(2500)]
    ids = await client.submit_batch(items)
    assert len(ids) == len(set(ids)) == 2500
    results = await client.wait_results(ids)
    assert [r.result for r in results] == [i + 1000 for i in range(2500)]
    assert [r.task_id for r in results] == ids
