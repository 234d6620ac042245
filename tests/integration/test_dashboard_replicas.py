"""The leader's view of its replicas, with real processes: etcd elects between two
replicated control planes ("a" and "b"); the leader's ``GET /api/replicas`` lists both,
its follower in sync, and its dashboard, in headless Chromium, shows them in the Replicas
panel. A control plane alone hides the panel. Every wait polls against a deadline."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import etcd_server
import pytest
from chromium import CHROMIUM, LIVE_TIMEOUT_MS, launched
from etcd_server import EtcdServer
from harness import Cluster, Proc, free_port_block, wait_until
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

NAMES = ("a", "b")
ELECTED_TIMEOUT = 30.0


@dataclass
class Replica:
    name: str
    http_port: int
    proc: Proc

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"


def _port_outside(base: int, size: int) -> int:
    while True:
        port = free_port_block(1)
        if not base <= port < base + size:
            return port


def start_replica(cluster: Cluster, etcd: EtcdServer, name: str) -> Replica:
    """A replica with its own ports (the replication port is base + 6) and state dir."""
    base = free_port_block(7)
    http_port = _port_outside(base, 7)
    state_dir = cluster.tmp / f"state-{name}"
    state_dir.mkdir()
    proc = cluster.spawn(
        f"replica-{name}",
        "control-plane",
        "--task-modules",
        "it_tasks",
        "--leader-election",
        etcd.url("fw-dashboard"),
        "--state-dir",
        str(state_dir),
        "--replica-id",
        name,
        "--base-port",
        str(base),
        "--discovery-port",
        str(_port_outside(base, 7)),
        "--http-port",
        str(http_port),
        "--local-concurrency",
        "0",
        "--shutdown-timeout",
        "3",
    )
    return Replica(name, http_port, proc)


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    with EtcdServer(tmp_path) as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        yield session


@pytest.fixture
def replicas(cluster: Cluster, etcd: EtcdServer) -> Iterator[dict[str, Replica]]:
    """Replicas "a" and "b", stopped before etcd is (each holds a lease in it)."""
    started: dict[str, Replica] = {}
    try:
        for name in NAMES:
            started[name] = start_replica(cluster, etcd, name)
        yield started
    finally:
        for replica in started.values():
            replica.proc.stop()


async def readyz(http: aiohttp.ClientSession, replica: Replica) -> dict[str, Any]:
    """``/readyz``'s JSON (a follower answers 503, still JSON); {} while not listening."""
    try:
        async with http.get(f"{replica.http}/readyz") as response:
            return dict(await response.json())
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return {}


async def elected(http: aiohttp.ClientSession, replicas: dict[str, Replica]) -> Replica:
    """Wait until exactly one replica says it leads and is ready; that one."""
    leaders: list[Replica] = []

    async def one_leader() -> bool:
        said = {name: await readyz(http, r) for name, r in replicas.items()}
        leaders[:] = [
            replicas[name]
            for name, s in said.items()
            if s.get("role") == "leader" and s.get("status") == "ready"
        ]
        return len(leaders) == 1

    await wait_until(one_leader, ELECTED_TIMEOUT, "one ready leader")
    return leaders[0]


async def follower_in_sync(
    http: aiohttp.ClientSession, leader: Replica, follower: str
) -> dict[str, Any]:
    """Wait until the leader's ``/api/replicas`` shows ``follower`` in sync, with no lag."""
    found: list[dict[str, Any]] = []

    async def in_sync() -> bool:
        _, document = await get_json(http, f"{leader.http}/api/replicas")
        found[:] = [document]
        listed = {r["name"]: r for r in document.get("replicas", [])}
        entry = listed.get(follower, {})
        return bool(entry.get("in_sync")) and entry.get("lag_frames") == 0

    await wait_until(in_sync, ELECTED_TIMEOUT, f"follower {follower} in sync")
    return found[0]


async def test_the_leaders_api_lists_both_replicas_with_its_follower_in_sync(
    replicas: dict[str, Replica], http: aiohttp.ClientSession
) -> None:
    # Given two replicated control planes, one elected
    leader = await elected(http, replicas)
    follower = next(r for r in replicas.values() if r is not leader)

    # When the follower has caught up with the leader's journal
    document = await follower_in_sync(http, leader, follower.name)

    # Then the leader's /api/replicas names its term and mode, itself, then its follower
    said = await readyz(http, leader)
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
    async with http.get(f"{follower.http}/api/replicas") as response:
        assert response.status == 404


@needs_chromium
async def test_the_leaders_dashboard_shows_both_replicas_with_their_roles(
    replicas: dict[str, Replica], http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    # Given two replicated control planes, the follower caught up
    leader = await elected(http, replicas)
    follower = next(r for r in replicas.values() if r is not leader)
    await follower_in_sync(http, leader, follower.name)

    async with launched() as browser:
        page = await browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        # When the leader's dashboard opens
        await page.goto(leader.http + "/")

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
        said = await readyz(http, leader)
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
