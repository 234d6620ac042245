"""Replicated control planes under faults, with real processes: etcd elects, two control
planes replicate, two subworkers run tasks, and a client submits about 2,000 tasks/s
while the leader is killed, paused, its follower restarted or etcd stopped.

What every test holds to: each task the client saw acknowledged ends ``success`` with
its own result, read from whichever replica leads at the end.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from etcd_server import EtcdServer, runnable
from ha_cluster import Replica, Replicas
from ha_stream import Stream
from harness import Cluster, wait_until

from fastworker import Client, ControlPlaneUnavailable, FastWorkerError, SyncClient

pytestmark = pytest.mark.skipif(not runnable(), reason="etcd-server is not installed")


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    with EtcdServer(tmp_path) as server:
        yield server


@pytest.fixture
def replicas(tmp_path: Path, etcd: EtcdServer) -> Iterator[Replicas]:
    cluster = Cluster(tmp_path)
    try:
        yield Replicas(cluster, etcd)
    finally:
        for proc in cluster.procs:
            proc.signal(signal.SIGCONT)  # a paused process cannot stop
        cluster.stop()


@pytest.fixture
async def running(replicas: Replicas) -> tuple[Replica, Replica]:
    """Both replicas started and in sync, two subworkers registered: (leader, follower)."""
    replicas.start_all("--result-max-size", "100000")  # keep every result the test reads
    leader = await replicas.leader()
    await replicas.in_sync(leader)
    replicas.subworker()
    replicas.subworker()
    async with replicas.client() as client:
        await wait_for_workers(client, 2)
    follower = next(r for r in replicas.replicas.values() if r is not leader)
    return leader, follower


async def wait_for_workers(client: Client, count: int) -> None:
    async def registered() -> bool:
        return len(await client.list_workers()) >= count

    await wait_until(registered, 20, f"{count} subworkers")


async def test_kill_9_of_the_leader_mid_stream_loses_no_acknowledged_task(
    replicas: Replicas, running: tuple[Replica, Replica]
) -> None:
    leader, follower = running
    async with replicas.client() as client:
        stream = Stream(client)
        stream.start()
        await stream.count_at_least(4000)
        assert leader.proc is not None
        killed_at = time.monotonic()
        leader.proc.signal(signal.SIGKILL)
        new = await replicas.leader(other_than=leader.name)
        assert new is follower
        before = len(stream.acked)
        await stream.count_at_least(before + 4000, timeout=30)
        await stream.stop()
        failover = stream.longest_gap(killed_at)
        print(f"failover: {failover:.2f} s without an acknowledgement; {len(stream.acked)} acked")
        assert not stream.failed, stream.failed[:3]
        assert failover < 10
        await stream.verify(client)


async def test_a_paused_leader_steps_down_and_acknowledges_nothing_after(
    replicas: Replicas, running: tuple[Replica, Replica]
) -> None:
    leader, follower = running
    assert leader.proc is not None
    direct = Client(address=f"tcp://127.0.0.1:{leader.base_port}", timeout=20, retries=0)
    async with replicas.client() as client, direct:
        stream = Stream(client)
        stream.start()
        await stream.count_at_least(2000)
        leader.proc.signal(signal.SIGSTOP)
        # Requests to the paused leader wait in its sockets until it wakes.
        paused = [
            asyncio.create_task(direct.apply_async("add", (n, 1), task_id=f"paused-{n}"))
            for n in range(50)
        ]
        new = await replicas.leader(other_than=leader.name, timeout=30)
        assert new is follower
        before = len(stream.acked)
        await stream.count_at_least(before + 2000)
        leader.proc.signal(signal.SIGCONT)
        outcomes = await asyncio.gather(*paused, return_exceptions=True)
        assert all(isinstance(o, ControlPlaneUnavailable) for o in outcomes), outcomes

        async def following() -> bool:
            return leader.readyz().get("role") == "follower"

        await wait_until(following, 20, "the old leader to follow")
        await stream.stop()
        assert not stream.failed, stream.failed[:3]
        for n in range(50):  # the new leader never heard of them either
            assert await client.get_task_result(f"paused-{n}") is None
        await stream.verify(client)
        await replicas.in_sync(new)  # the old leader mirrors the new one


async def test_calls_held_by_a_paused_leader_go_to_its_successor_within_their_time(
    replicas: Replicas, running: tuple[Replica, Replica]
) -> None:
    # Given a client whose calls may each take two minutes (no retry: one long slot)
    leader, follower = running
    assert leader.proc is not None
    async with replicas.client(timeout=120, retries=0) as client:
        await client.delay("add", 0, 1)  # it follows the leader
        # When the leader is paused with calls in flight (its connections stay open)
        leader.proc.signal(signal.SIGSTOP)
        paused_at = time.monotonic()
        calls = [
            asyncio.create_task(client.apply_async("add", (n, 1), task_id=f"held-{n}"))
            for n in range(20)
        ]
        # Then they are sent again to the new leader once it leads, not when their time
        # runs out, while the old one is still paused
        handles = await asyncio.wait_for(asyncio.gather(*calls), 60)
        took = time.monotonic() - paused_at
        assert replicas.leading() is follower
        results = await client.wait_results(list(handles), timeout=30)
        assert [r.result for r in results] == [n + 1 for n in range(20)]
        print(f"acknowledged by the new leader {took:.2f} s after the pause")


async def test_a_follower_killed_and_restarted_under_load_catches_up(
    replicas: Replicas, running: tuple[Replica, Replica]
) -> None:
    leader, follower = running
    assert follower.proc is not None
    async with replicas.client() as client:
        stream = Stream(client)
        stream.start()
        await stream.count_at_least(2000)
        follower.proc.signal(signal.SIGKILL)
        follower.proc.wait()

        async def alone() -> bool:
            return leader.readyz().get("replication") == "alone"

        await wait_until(alone, 10, "the leader to go on alone")
        before = len(stream.acked)
        await stream.count_at_least(before + 2000)  # acknowledged on the leader's disk alone
        replicas.start(follower.name)
        await replicas.in_sync(leader, timeout=30)
        await stream.stop()

        async def no_lag() -> bool:
            text = leader.metrics()
            return f'fastworker_replication_lag_entries{{replica="{follower.name}"}} 0.0' in text

        await wait_until(no_lag, 10, "the follower's lag to return to zero")
        assert not stream.failed, stream.failed[:3]
        await stream.verify(client)


async def test_without_etcd_the_leader_serves_until_its_renew_deadline_then_refuses(
    replicas: Replicas, etcd: EtcdServer, running: tuple[Replica, Replica]
) -> None:
    leader, _ = running
    direct = Client(address=f"tcp://127.0.0.1:{leader.base_port}", timeout=5, retries=0)
    async with replicas.client() as client, direct:
        etcd.stop()
        stopped_at = time.monotonic()
        task_id = await direct.delay("add", 1, 1)  # well inside the 3.3 s renew deadline
        assert time.monotonic() - stopped_at < 2.0
        assert (await direct.wait_result(task_id, timeout=10)).result == 2

        async def refusing() -> bool:
            return leader.readyz().get("status") != "ready"

        await wait_until(refusing, 10, "the leader to stop serving")
        refused_after = time.monotonic() - stopped_at
        with pytest.raises(ControlPlaneUnavailable):
            await direct.delay("add", 2, 2)
        print(f"the leader stopped serving {refused_after:.2f} s after etcd stopped")
        etcd.start()
        await replicas.leader(timeout=40)
        task_id = await client.delay("add", 3, 3)
        assert (await client.wait_result(task_id, timeout=20)).result == 6


async def test_a_replica_that_etcd_refuses_exits_with_an_error_instead_of_retrying(
    replicas: Replicas, etcd: EtcdServer
) -> None:
    # Given an etcd that requires credentials this replica does not have
    etcd.require_credentials()
    # When a replica starts on it
    replica = replicas.start("a")
    assert replica.proc is not None
    # Then it stops at once with an error saying who refused it, and a non-zero exit
    assert await asyncio.to_thread(replica.proc.wait, 30) == 1
    output = replica.proc.output()
    assert "etcd refused this control plane" in output
    assert "stopped: the election failed" in output


async def test_a_follower_whose_token_the_leader_refuses_exits_with_an_error(
    replicas: Replicas,
) -> None:
    # Given a leader with a token
    replicas.start("a", env=replicas.cluster.env(FASTWORKER_AUTH_TOKEN="the-token"))
    await replicas.leader()
    # When a replica with another token follows it
    follower = replicas.start("b", env=replicas.cluster.env(FASTWORKER_AUTH_TOKEN="another"))
    assert follower.proc is not None
    # Then it stops with an error naming the setting (exit code 1), instead of retrying
    assert await asyncio.to_thread(follower.proc.wait, 30) == 1
    output = follower.proc.output()
    assert "the leader refused this replica" in output
    assert "set FASTWORKER_AUTH_TOKEN" in output
    assert "Traceback" not in output


async def test_a_replica_that_knows_no_leader_is_reported_as_one_not_as_absent(
    replicas: Replicas, etcd: EtcdServer
) -> None:
    # Given a replica that cannot be elected (etcd is down): it runs, and names no leader
    etcd.stop()
    replica = replicas.start("a")

    async def serving_http() -> bool:
        return replica.readyz() != {}  # {}: it does not answer yet

    await wait_until(serving_http, 20, "the replica to serve its HTTP port")
    # When a client looks for the control plane at its discovery address
    with pytest.raises(ControlPlaneUnavailable) as raised:
        async with Client(replica.discovery, timeout=2.0, connect_timeout=1.0):
            pass
    # Then it is told a control plane listens there but names no leader, not to start one
    said = str(raised.value)
    assert f"a control plane listens at {replica.discovery} but named no leader" in said
    assert "Start one with" not in said


async def test_a_client_dialing_a_follower_is_told_where_the_leader_is(
    replicas: Replicas, running: tuple[Replica, Replica]
) -> None:
    # Given a client given a follower's own address, not the discovery addresses
    leader, follower = running
    direct = Client(address=f"tcp://127.0.0.1:{follower.base_port}", timeout=2, retries=0)
    # When it submits (and a subworker registers) there
    async with direct:
        with pytest.raises(ControlPlaneUnavailable) as raised:
            await direct.delay("add", 1, 1)
    # Then the answer says this is a follower, and which replica leads at which address
    said = str(raised.value)
    assert "is a follower replica" in said
    assert f"the leader is {leader.readyz()['replica']}" in said
    assert f"submit address tcp://127.0.0.1:{leader.base_port}" in said


async def test_a_restarted_follower_learns_the_leader_at_once_not_after_a_lease(
    replicas: Replicas,
) -> None:
    # Given replicas with a long lease (30 s), and the follower stopped and started again
    replicas.start_all("--lease-duration", "30")
    leader = await replicas.leader(timeout=60)
    await replicas.in_sync(leader)
    follower = next(r for r in replicas.replicas.values() if r is not leader)
    assert follower.proc is not None
    follower.proc.stop()
    restarted_at = time.monotonic()
    replicas.start(follower.name)

    # Then it follows the leader and catches up long before a lease has passed (it reads
    # the leader key at once, instead of campaigning only once a lease has gone by)
    async def caught_up() -> bool:
        said = follower.readyz()
        return said.get("role") == "follower" and said.get("phase") == "in_sync"

    await wait_until(caught_up, 20, "the restarted follower to catch up")
    print(f"in sync {time.monotonic() - restarted_at:.2f} s after it started (lease: 30 s)")


async def test_blocking_calls_one_at_a_time_go_on_across_a_kill_9_of_the_leader(
    replicas: Replicas, running: tuple[Replica, Replica]
) -> None:
    # Given a web process's blocking client, one call at a time, with no retries of its own
    leader, _ = running
    acked: list[str] = []
    failed: list[BaseException] = []
    stop = threading.Event()

    def calls() -> None:
        with SyncClient(replicas.discovery, timeout=25, retries=0) as client:
            number = 0
            while not stop.is_set():
                number += 1
                try:
                    acked.append(client.apply_async("add", (number, 1), task_id=f"b-{number}"))
                except FastWorkerError as exc:
                    failed.append(exc)

    caller = threading.Thread(target=calls)
    caller.start()
    try:

        async def acknowledged(count: int) -> None:
            async def enough() -> bool:
                return len(acked) >= count

            await wait_until(enough, 30, f"{count} blocking calls acknowledged")

        await acknowledged(50)
        # When the leader is killed mid-stream
        assert leader.proc is not None
        leader.proc.signal(signal.SIGKILL)
        await replicas.leader(other_than=leader.name)
        # Then the calls go on with the new leader, and none of them failed
        await acknowledged(len(acked) + 50)
    finally:
        stop.set()
        await asyncio.to_thread(caller.join)
    assert failed == []
    async with replicas.client() as client:
        results = await client.wait_results(list(acked), timeout=30)
    assert {r.status for r in results} == {"success"}
