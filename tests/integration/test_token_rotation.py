"""Rotating the shared token with nothing refused (docs/guides/operations.md): the control
plane accepts ``FASTWORKER_NEXT_AUTH_TOKEN`` as well as its own while clients and
subworkers move over, on every socket and on the HTTP API; any other token is refused."""

from __future__ import annotations

import aiohttp
import pytest
from harness import Cluster
from http_helpers import wait_for_status

from fastworker import Client, TaskStatus, Unauthorized

OLD = "old-token-for-the-rotation-test-1a2b"
NEW = "new-token-for-the-rotation-test-3c4d"


@pytest.fixture
async def rotating(cluster: Cluster) -> Cluster:
    """A control plane with the old token that already accepts the new one."""
    cluster.control_plane(
        env=cluster.env(FASTWORKER_AUTH_TOKEN=OLD, FASTWORKER_NEXT_AUTH_TOKEN=NEW)
    )
    async with cluster.client(auth_token=OLD) as client:
        await cluster.workers(client, 1)
    return cluster


async def test_during_a_rotation_both_tokens_work_and_no_other(rotating: Cluster) -> None:
    # A subworker already moved to the new token joins and runs tasks
    rotating.subworker(env=rotating.env(FASTWORKER_AUTH_TOKEN=NEW))
    async with rotating.client(auth_token=NEW) as moved, rotating.client(auth_token=OLD) as old:
        await rotating.workers(moved, 2)
        ids = [await moved.delay("add", i, 1) for i in range(10)]
        ids += [await old.delay("add", i, 2) for i in range(10)]
        results = await old.wait_results(ids, timeout=20)
        assert {r.status for r in results} == {TaskStatus.SUCCESS}
        assert {r.worker_id for r in results if r.worker_id}  # ran somewhere

    async with Client(rotating.discovery, timeout=10, retries=0, auth_token="other") as intruder:
        with pytest.raises(Unauthorized):
            await intruder.delay("add", 1, 1)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        await wait_for_status(http, f"{rotating.http}/readyz", 200)
        for token, status in ((OLD, 200), (NEW, 200), ("other", 401)):
            headers = {"Authorization": f"Bearer {token}"}
            async with http.get(f"{rotating.http}/api/overview", headers=headers) as response:
                assert response.status == status, token


def test_a_next_token_without_a_token_is_refused_at_start(cluster: Cluster) -> None:
    plane = cluster.control_plane(env=cluster.env(FASTWORKER_NEXT_AUTH_TOKEN=NEW))
    assert plane.wait(30) == 2
    assert "--next-auth-token is for rotating a token: set --auth-token too" in plane.output()
    assert NEW not in plane.output()
