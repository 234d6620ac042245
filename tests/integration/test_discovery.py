"""Discovery: subworkers and clients need only the discovery address."""

from __future__ import annotations

import asyncio
import time

import pynng
from harness import Cluster, wait_until

from fastworker import Client
from fastworker.testing import free_port_block
from fastworker_protocol import Announce, Codec, Probe


async def _announcement(discovery: str) -> Announce:
    codec = Codec()
    with pynng.Bus0(dial=discovery) as bus:
        while True:
            bus.send(codec.encode(Probe()))
            try:
                data = await asyncio.wait_for(bus.arecv(), 0.25)
            except TimeoutError:
                continue
            message = codec.decode(data)
            if isinstance(message, Announce):
                return message


async def test_a_subworker_started_after_the_control_plane_is_used_within_3_seconds(
    cluster: Cluster,
) -> None:
    cluster.control_plane(local_concurrency=0)
    async with cluster.client() as client:
        started = time.monotonic()
        worker = cluster.subworker()
        result = await client.submit_task("nap", args=(0,), timeout=10)
        elapsed = time.monotonic() - started
    assert result.result["pid"] == worker.pid
    assert elapsed < 3.0, f"first task ran {elapsed:.2f} s after the subworker started"


async def test_the_announcement_never_advertises_a_wildcard_address(cluster: Cluster) -> None:
    cluster.control_plane("--host", "0.0.0.0", "--advertise-host", "127.0.0.1")
    announce = await asyncio.wait_for(_announcement(cluster.discovery), 20)
    addresses = [*announce.submit, announce.results, announce.registration]
    assert all(a.startswith("tcp://127.0.0.1:") for a in addresses), addresses
    assert announce.submit[0].endswith(f":{cluster.base_port}")
    assert announce.registration.endswith(f":{cluster.base_port + 5}")


async def test_binding_every_interface_advertises_the_host_name_not_0_0_0_0(
    cluster: Cluster,
) -> None:
    cluster.control_plane("--host", "0.0.0.0")
    announce = await asyncio.wait_for(_announcement(cluster.discovery), 20)
    assert "0.0.0.0" not in announce.results
    assert "0.0.0.0" not in announce.registration


async def test_a_subworker_registers_again_by_itself_when_the_control_plane_restarts(
    cluster: Cluster,
) -> None:
    first = cluster.control_plane(local_concurrency=0)
    worker = cluster.subworker()
    async with cluster.client() as client:
        await cluster.workers(client, 1)
    first.stop()
    cluster.control_plane(local_concurrency=0)
    async with cluster.client() as client:
        result = await client.submit_task("nap", args=(0,), timeout=15)
    assert result.result["pid"] == worker.pid


async def test_a_lost_subworker_disappears_from_the_worker_list(cluster: Cluster) -> None:
    cluster.control_plane(local_concurrency=0)
    worker = cluster.subworker()
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        worker.popen.kill()
        worker.wait()

        async def gone() -> bool:
            return await client.list_workers() == []

        await wait_until(gone, timeout=5, what="the killed subworker to be dropped")


async def test_a_client_finds_the_control_plane_by_discovery_or_by_address(
    cluster: Cluster,
) -> None:
    cluster.control_plane()
    async with cluster.client() as by_discovery:
        assert (await by_discovery.submit_task("add", args=(1, 2))).result == 3
    async with Client(address=f"tcp://127.0.0.1:{cluster.base_port}", timeout=10) as direct:
        assert (await direct.submit_task("add", args=(2, 2))).result == 4


async def test_a_subworker_follows_a_control_plane_that_moved_to_other_ports(
    cluster: Cluster,
) -> None:
    first = cluster.control_plane(local_concurrency=0)
    worker = cluster.subworker()
    async with cluster.client() as client:
        await cluster.workers(client, 1)
    first.stop()
    cluster.base_port = free_port_block(6)  # same discovery address, new submission ports
    cluster.control_plane(local_concurrency=0)
    async with cluster.client() as client:
        result = await client.submit_task("nap", args=(0,), timeout=15)
    assert result.result["pid"] == worker.pid
