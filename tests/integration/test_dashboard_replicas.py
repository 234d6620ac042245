"""The leader's view of its replicas, with real processes: etcd elects between two
replicated control planes ("a" and "b"); the leader's ``GET /api/replicas`` lists both,
its follower in sync, and its dashboard, in headless Chromium, shows them in the Replicas
panel. A control plane alone hides the panel. Every wait polls against a deadline."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import etcd_server
import pytest
from chromium import CHROMIUM, LIVE_TIMEOUT_MS, launched
from etcd_server import EtcdServer
from ha_cluster import Replica, Replicas
from harness import Cluster, wait_until
from http_helpers import get_json, wait_for_status

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not etcd_server.runnable(), reason="install Debian's etcd-server (scripts/test does it)"
    ),
]

needs_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM) and not os.environ.get("CI"),
    reason="Debian's chromium is not installed (scripts/test installs it when run as root)",
)

ELECTED_TIMEOUT = 30.0


def http_of(replica: Replica) -> str:
    return f"http://127.0.0.1:{replica.http_port}"


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    with EtcdServer(tmp_path) as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        yield session


@pytest.fixture
async def pair(cluster: Cluster, etcd: EtcdServer) -> AsyncIterator[tuple[Replica, Replica]]:
    """Replicas "a" and "b" started, one elected: (leader, follower). Stopped before etcd
    is (each holds a lease in it)."""
    replicas = Replicas(cluster, etcd)
    try:
        replicas.start_all()
        leader = await replicas.leader(ELECTED_TIMEOUT)
        follower = next(r for r in replicas.replicas.values() if r is not leader)
        yield leader, follower
    finally:
        cluster.stop()


async def follower_in_sync(
    http: aiohttp.ClientSession, leader: Replica, follower: str
) -> dict[str, Any]:
    """Wait until the leader's ``/api/replicas`` shows ``follower`` in sync, with no lag."""
    found: list[dict[str, Any]] = []

    async def in_sync() -> bool:
        _, document = await get_json(http, f"{http_of(leader)}/api/replicas")
        found[:] = [document]
        listed = {r["name"]: r for r in document.get("replicas", [])}
        entry = listed.get(follower, {})
        return bool(entry.get("in_sync")) and entry.get("lag_frames") == 0

    await wait_until(in_sync, ELECTED_TIMEOUT, f"follower {follower} in sync")
    return found[0]


async def test_the_leaders_api_lists_both_replicas_with_its_follower_in_sync(
    pair: tuple[Replica, Replica], http: aiohttp.ClientSession
) -> None:
    # Given two replicated control planes, one elected
    leader, follower = pair

    # When the follower has caught up with the leader's journal
    document = await follower_in_sync(http, leader, follower.name)

    # Then the leader's /api/replicas names its term and mode, itself, then its follower
    said = leader.readyz()
    assert document["replicated"] is True
    assert document["epoch"] == said["epoch"] >= 1
    assert document["mode"] == "replicated"
    assert document["sync_replicas"] == 1
    first, second = document["replicas"]
    assert first == {"name": leader.name, "role": "leader", "candidate": said["replica"]}
    assert second["name"] == follower.name
    assert second["role"] == "follower"
    assert second["in_sync"] is True
    assert second["lag_bytes"] == 0
    assert second["lag_seconds"] == 0.0

    # And the follower serves no dashboard API at all
    async with http.get(f"{http_of(follower)}/api/replicas") as response:
        assert response.status == 404


@needs_chromium
async def test_the_leaders_dashboard_shows_both_replicas_with_their_roles(
    pair: tuple[Replica, Replica], http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    # Given two replicated control planes, the follower caught up
    leader, follower = pair
    await follower_in_sync(http, leader, follower.name)

    async with launched() as browser:
        page = await browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        # When the leader's dashboard opens
        await page.goto(http_of(leader) + "/")

        # Then its Replicas panel shows the leader and its follower, in sync
        await page.locator("#replicas-panel").wait_for(state="visible", timeout=LIVE_TIMEOUT_MS)
        await page.wait_for_function(
            """([leader, follower]) => {
                const row = (name) => document.querySelector(
                    `#replicas-table tr[data-replica="${name}"]`);
                const a = row(leader), b = row(follower);
                return a !== null && b !== null && a.dataset.role === "leader"
                    && b.dataset.role === "follower" && b.dataset.inSync === "true";
            }""",
            arg=[leader.name, follower.name],
            timeout=LIVE_TIMEOUT_MS,
        )
        rows = await page.locator("#replicas-table tbody tr").all_inner_texts()
        assert [row.split()[:2] for row in rows] == [
            [leader.name, "leader"],
            [follower.name, "follower"],
        ]
        assert "in sync" in rows[1]
        assert await page.text_content("#replicas-mode") == "replicated"
        said = leader.readyz()
        assert await page.text_content("#replicas-epoch") == str(said["epoch"])

        screenshot = tmp_path / "dashboard-replicas.png"
        await page.screenshot(path=str(screenshot), full_page=True)
        print(f"dashboard screenshot: {screenshot}")
        assert errors == []


@needs_chromium
async def test_a_control_plane_alone_hides_the_replicas_panel(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    # Given a control plane that is not replicated
    cluster.control_plane(local_concurrency=0)
    await wait_for_status(http, f"{cluster.http}/readyz", 200)

    async with launched() as browser:
        page = await browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        # When its dashboard has loaded /api/replicas
        await page.goto(cluster.http + "/")
        await page.wait_for_function(
            "document.getElementById('replicas-panel').dataset.replicated === 'false'",
            timeout=LIVE_TIMEOUT_MS,
        )

        # Then the Replicas panel stays hidden
        assert await page.locator("#replicas-panel").is_hidden()
        assert errors == []
