"""What one connection can make a real control plane hold: requests whose peer hung up are
let go, a peer that never reads its replies is disconnected, and a client with thousands of
requests in flight on one connection is served in full."""

from __future__ import annotations

import asyncio
import re
import socket
import struct
import time

import aiohttp
import msgspec
import pynng
from harness import Cluster, wait_until
from test_backpressure import rss_mib

from fastworker import SyncClient, TaskResult, TaskStatus

ABANDONED = 5_000
CUT_WARNING = "closing a connection that does not read its replies"


async def metric(http: aiohttp.ClientSession, base: str, series: str) -> float:
    """One sample of the control plane's /metrics, by its series and labels as written."""
    async with http.get(f"{base}/metrics") as response:
        text = await response.text()
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    assert found is not None, f"no {series} on /metrics"
    return float(found.group(1))


async def waits_held(http: aiohttp.ClientSession, base: str) -> float:
    return await metric(http, base, "fastworker_waits_held")


async def test_result_waits_whose_peers_hung_up_are_let_go(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    # Given a task that stays scheduled for hours
    control_plane = cluster.control_plane()
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        task_id = (await client.delay("add", 1, 2, countdown=7200)).id
        before = rss_mib(control_plane.pid)

        # When 5,000 peers each ask to wait an hour for it, then close their connection
        address = f"tcp://127.0.0.1:{cluster.base_port + 4}"
        ask = msgspec.msgpack.encode({"op": "get", "task_ids": [task_id], "wait": 3600.0})
        for _ in range(ABANDONED // 250):
            peers = [pynng.Req0(dial=address) for _ in range(250)]
            for peer in peers:
                peer.send(ask)
            for peer in peers:
                peer.close()

        # Then no wait is held for them, memory is back near where it was
        async def none_held() -> bool:
            return await waits_held(http, cluster.http) == 0

        await wait_until(none_held, 30, "every abandoned wait let go")
        grew = rss_mib(control_plane.pid) - before
        print(f"RSS after {ABANDONED} abandoned waits: +{grew:.1f} MiB")
        assert grew < 20
        # And a live client is served, its own wait included
        assert (await client.submit_task("add", (2, 2))).result == 4
        waited_for = await client.get_task_result(task_id)
        assert waited_for is not None
        assert waited_for.status == TaskStatus.SCHEDULED


async def test_twenty_thousand_waits_over_four_connections_give_their_memory_back(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    # Given a task due tomorrow, and a control plane that holds 5,000 waits at most
    control_plane = cluster.control_plane()
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        task_id = (await client.delay("add", 1, 2, countdown=86_400)).id
        before = rss_mib(control_plane.pid)

        # When 4 connections each send 5,000 requests to wait an hour for it
        address = f"tcp://127.0.0.1:{cluster.base_port + 4}"
        ask = msgspec.msgpack.encode({"op": "get", "task_ids": [task_id], "wait": 3600.0})
        peers = [pynng.Req0(dial=address) for _ in range(4)]
        try:
            for peer in peers:
                for _ in range(5_000):
                    peer.new_context().send(ask)

            # Then 5,000 are held and the others answered at once, not held
            async def all_in() -> bool:
                refused = await metric(http, cluster.http, "fastworker_waits_refused_total")
                return refused == 15_000

            await wait_until(all_in, 60, "every wait held or answered")
            assert await waits_held(http, cluster.http) == 5_000
            held_bytes = 'fastworker_kept_bytes{kept="held_waits"}'
            assert await metric(http, cluster.http, held_bytes) == 5_000 * 7 * 1024
            peak = rss_mib(control_plane.pid)
        finally:
            for peer in peers:
                peer.close()

        # And once the connections close, none is held and memory is back near where it was
        async def none_held() -> bool:
            return await waits_held(http, cluster.http) == 0

        await wait_until(none_held, 30, "every abandoned wait let go")

        async def memory_back() -> bool:
            return rss_mib(control_plane.pid) - before <= 20

        await wait_until(memory_back, 30, "resident memory within 20 MiB of the start")
        print(f"RSS {before:.1f} -> peak {peak:.1f} -> {rss_mib(control_plane.pid):.1f} MiB")
        assert (await client.submit_task("add", (2, 2))).result == 4


async def test_dashboard_event_streams_past_the_bound_are_refused_with_503(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    cluster.control_plane("--max-event-streams", "1")
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        async with http.get(f"{cluster.http}/api/events") as first:
            assert first.status == 200
            async with http.get(f"{cluster.http}/api/events") as second:
                assert second.status == 503
                refusal = await second.json()
                assert refusal["error"] == "too_many_streams"
                assert "--max-event-streams" in refusal["message"]

        # a stream that closed frees its place
        async def streams_again() -> bool:
            async with http.get(f"{cluster.http}/api/events") as third:
                return third.status == 200

        await wait_until(streams_again, 10, "a new stream once the first closed")


def never_reading_peer(port: int) -> socket.socket:
    """An SP REQ peer written by hand (PROTOCOL.md section 3), so it can stop reading."""
    peer = socket.create_connection(("127.0.0.1", port))
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    peer.sendall(b"\x00SP\x00\x00\x30\x00\x00")
    assert peer.recv(8)[:4] == b"\x00SP\x00"
    return peer


def send_requests(peer: socket.socket, body: bytes, count: int) -> None:
    """``count`` requests in one write: the control plane may cut the connection as soon
    as it has read a few of them, and a later write would then fail."""
    frames = []
    for request_id in range(1, count + 1):
        payload = struct.pack(">I", 0x80000000 | request_id) + body
        frames.append(struct.pack(">Q", len(payload)) + payload)
    peer.sendall(b"".join(frames))


def read_to_the_end(peer: socket.socket) -> int:
    """Bytes read until the control plane closes the connection (10 s at most)."""
    peer.settimeout(10)
    total = 0
    try:
        while chunk := peer.recv(1 << 20):
            total += len(chunk)
    except ConnectionResetError:
        pass
    return total


async def test_a_peer_that_never_reads_its_replies_is_disconnected(cluster: Cluster) -> None:
    # Given a 4 MB result
    control_plane = cluster.control_plane()
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        task_id = (await client.submit_task("text_of", (4_000_000,))).task_id
        before = rss_mib(control_plane.pid)

        # When one connection asks for it 150 times and never reads a reply
        peer = never_reading_peer(cluster.base_port + 4)
        try:
            ask = msgspec.msgpack.encode({"op": "get", "task_ids": [task_id]})
            await asyncio.to_thread(send_requests, peer, ask, 150)

            # Then the control plane closes that connection, saying so, instead of
            # queueing 600 MB of replies for it
            async def warned() -> bool:
                return CUT_WARNING in control_plane.output()

            await wait_until(warned, 30, "the warning")
            assert await asyncio.to_thread(read_to_the_end, peer) < 64 << 20
        finally:
            peer.close()
        grew = rss_mib(control_plane.pid) - before
        print(f"RSS after 150 unread 4 MB replies: +{grew:.1f} MiB")
        assert grew < 100
        # And everyone else is served
        result = await client.get_task_result(task_id)
        assert result is not None
        assert len(result.result) == 4_000_000


async def test_thousands_of_requests_in_flight_on_one_connection_are_all_answered(
    cluster: Cluster,
) -> None:
    control_plane = cluster.control_plane(local_concurrency=8)
    async with cluster.client(timeout=60) as client:
        await cluster.workers(client, 1)
        started = time.monotonic()
        ids = await asyncio.gather(*(client.delay("add", i, 1) for i in range(5_000)))
        results = await asyncio.gather(*(client.wait_result(t) for t in ids))
        reads = await asyncio.gather(*(client.get_task_result(t) for t in ids))
        print(f"5,000 delays, waits and reads in {time.monotonic() - started:.1f} s")
    assert [r.result for r in results] == [i + 1 for i in range(5_000)]
    assert all(r is not None and r.status == TaskStatus.SUCCESS for r in reads)
    assert CUT_WARNING not in control_plane.output()


async def test_a_control_plane_that_holds_no_wait_still_gives_final_results(
    cluster: Cluster, http: aiohttp.ClientSession
) -> None:
    # Given a control plane whose held waits are all taken (none allowed)
    cluster.control_plane("--max-held-waits", "0")
    async with cluster.client() as client:
        await cluster.workers(client, 1)

        # When clients wait for tasks that take a while, async and blocking
        waited = await client.submit_task("nap", (0.8,), timeout=30)
        task_id = await client.delay("nap", 0.8)
        got = await client.wait_result(task_id, timeout=30)

        def blocking() -> TaskResult:
            with SyncClient(cluster.discovery) as sync:
                return sync.submit_task("nap", (0.8,), timeout=30)

        blocked = await asyncio.to_thread(blocking)

    # Then each gets its final result: answered early, they asked again
    assert [r.status for r in (waited, got, blocked)] == [TaskStatus.SUCCESS] * 3
    assert await metric(http, cluster.http, "fastworker_waits_refused_total") >= 3
