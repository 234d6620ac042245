"""Clients and subworkers follow the leader of replicated control planes through a
failover, and behave as they always did with a control plane alone (epoch 0).

The control planes are faked with real NNG sockets, each served by a thread: a replica's
discovery BUS that answers probes with the announcement it is given, and a leader's REP
sockets (four submission ports, results, registration) that answer what they are asked,
stay silent, or answer ``unavailable`` once deposed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pynng
import pytest
import trustme

from fastworker import TLS, Client, ControlPlaneUnavailable, SyncClient, TaskNotFound, TaskRegistry
from fastworker._blocking import BlockingBus
from fastworker.testing import free_port_block
from fastworker_common.discovery import DiscoveryPeer
from fastworker_protocol import (
    Accepted,
    Ack,
    Announce,
    Assign,
    Codec,
    Drain,
    Error,
    ErrorCode,
    Fetch,
    Get,
    ListWorkers,
    Message,
    PortMap,
    Priority,
    Probe,
    Register,
    Registered,
    Results,
    Submit,
    Unregister,
    WorkerList,
    tcp_address,
)
from fastworker_subworker import Subworker, SubworkerConfig

CODEC = Codec()
POLL_MS = 50  # how long a fake's thread waits in a receive before looking at its stop flag
QUICK: dict[str, Any] = {"timeout": 10.0, "retries": 3, "connect_timeout": 0.5}


class Served:
    """One thread serving one NNG socket until closed: ``answer`` turns each request into
    its reply (``None``: no reply). The socket is closed only once the thread has let go
    of it (closing under a receiving thread can hang pynng)."""

    def __init__(self, socket: pynng.Socket, answer: Callable[[bytes], bytes | None]) -> None:
        self.socket = socket
        self._answer = answer
        self.stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                data = self.socket.recv()
            except pynng.Timeout:
                continue
            reply = self._answer(data)
            if reply is not None:
                with contextlib.suppress(pynng.NNGException):
                    self.socket.send(reply)

    def stop(self) -> None:
        self.stopped.set()

    def close(self) -> None:
        self.stopped.set()
        self._thread.join()
        self.socket.close()


class FakeDiscovery:
    """A replica's discovery BUS: announces ``announce`` (None: nothing) when it is set,
    in answer to each probe, and every ``ANNOUNCE_INTERVAL`` as a real one does."""

    ANNOUNCE_INTERVAL = 2.0

    def __init__(self) -> None:
        self.address = f"tcp://127.0.0.1:{free_port_block(1)}"
        self._announce: Announce | None = None
        self.probes = 0
        self._probed = threading.Condition()
        bus = pynng.Bus0(listen=self.address, recv_timeout=POLL_MS)
        self._served = Served(bus, self._answer)
        self._ticking = threading.Thread(target=self._tick, daemon=True)
        self._ticking.start()

    @property
    def announce(self) -> Announce | None:
        return self._announce

    @announce.setter
    def announce(self, announce: Announce | None) -> None:
        self._announce = announce
        self._say()

    def _say(self) -> None:
        if self._announce is not None:
            with contextlib.suppress(pynng.NNGException):
                self._served.socket.send(CODEC.encode(self._announce), block=False)

    def _tick(self) -> None:
        while not self._served.stopped.wait(self.ANNOUNCE_INTERVAL):
            self._say()

    def _answer(self, data: bytes) -> bytes | None:
        if isinstance(CODEC.decode(data), Probe):
            with self._probed:
                self.probes += 1
                self._probed.notify_all()
            if self._announce is not None:
                return CODEC.encode(self._announce)
        return None

    def wait_probes(self, count: int, timeout: float = 10.0) -> None:
        with self._probed:
            assert self._probed.wait_for(lambda: self.probes >= count, timeout), "no probe"

    def close(self) -> None:
        self._served.stop()
        self._ticking.join()
        self._served.close()


class FakeLeader:
    """A control plane's REP sockets. It answers ``submit`` (recording the task ids),
    ``get``, ``list_workers``, ``register``, ``fetch``, ``drain``, ``unregister``; or says
    nothing while ``silent``, or ``unavailable`` once ``deposed``."""

    def __init__(self, instance_id: str, epoch: int) -> None:
        ports = PortMap(base=free_port_block(6))
        self.announce = Announce(
            instance_id=instance_id,
            submit=[tcp_address("127.0.0.1", ports.submission(p)) for p in Priority.by_rank()],
            results=tcp_address("127.0.0.1", ports.results),
            registration=tcp_address("127.0.0.1", ports.registration),
            epoch=epoch,
        )
        self.silent = False
        self.deposed = False
        self._closed = threading.Event()
        self.received: list[Message] = []
        self.result_connections = 0  # REQ sockets that connected to the results port
        self._heard = threading.Condition()
        self._sockets: list[Served] = []
        for address in [*self.announce.submit, self.announce.results, self.announce.registration]:
            rep = pynng.Rep0(listen=address, recv_timeout=POLL_MS)
            if address == self.announce.results:
                rep.add_post_pipe_connect_cb(self._connected)
            self._sockets.append(Served(rep, self._answer))

    def _connected(self, _pipe: pynng.Pipe) -> None:
        self.result_connections += 1

    @property
    def task_ids(self) -> list[str]:
        return [t.id for m in self.received if isinstance(m, Submit) for t in m.tasks]

    def of_kind(self, kind: type[Message]) -> list[Message]:
        return [m for m in self.received if isinstance(m, kind)]

    def wait_received(self, count: int, timeout: float = 10.0) -> None:
        with self._heard:
            assert self._heard.wait_for(lambda: len(self.received) >= count, timeout)

    def _answer(self, data: bytes) -> bytes | None:
        message = CODEC.decode(data)
        with self._heard:
            self.received.append(message)
            self._heard.notify_all()
        if self.silent:
            return None
        if self.deposed:
            return CODEC.encode(Error(code=ErrorCode.UNAVAILABLE, message="not the leader"))
        return CODEC.encode(self._reply(message))

    def _reply(self, message: Message) -> Message:
        if isinstance(message, Submit):
            return Accepted(task_ids=[t.id for t in message.tasks])
        if isinstance(message, Get):
            return Results(results=[None] * len(message.task_ids))
        if isinstance(message, ListWorkers):
            return WorkerList(workers=[])
        if isinstance(message, Register):
            return Registered(
                worker_id=message.worker_id,
                control_plane_id=self.announce.instance_id,
                heartbeat_timeout=30.0,
            )
        if isinstance(message, Fetch):
            self._closed.wait(min(message.wait, 0.1))  # held a little, as a real one holds it
            return Assign(tasks=[])
        if isinstance(message, Drain | Unregister):
            return Ack()
        return Error(code=ErrorCode.WRONG_PORT, message=f"not faked: {message!r}")

    def close(self) -> None:
        self._closed.set()
        for served in self._sockets:
            served.stop()  # all at once: each thread takes up to POLL_MS to see it
        for served in self._sockets:
            served.close()


@pytest.fixture
def discovery() -> Iterator[FakeDiscovery]:
    fake = FakeDiscovery()
    yield fake
    fake.close()


@pytest.fixture
def leaders() -> Iterator[Callable[[str, int], FakeLeader]]:
    """Makes fake leaders, all closed at the end (closing one twice is harmless)."""
    made: list[FakeLeader] = []

    def make(instance_id: str, epoch: int) -> FakeLeader:
        made.append(FakeLeader(instance_id, epoch))
        return made[-1]

    yield make
    for leader in made:
        with contextlib.suppress(pynng.NNGException):
            leader.close()


def nowhere() -> str:
    return f"tcp://127.0.0.1:{free_port_block(1)}"


async def announce_after_probe(discovery: FakeDiscovery, announce: Announce) -> None:
    """Announce ``announce`` once the client probes again: it is looking for a leader."""
    await asyncio.to_thread(discovery.wait_probes, discovery.probes + 1)
    discovery.announce = announce


# --- following a new leader ------------------------------------------------------------------


async def test_a_submission_in_flight_when_the_leader_dies_is_accepted_by_its_successor(
    discovery: FakeDiscovery, leaders: Callable[[str, int], FakeLeader]
) -> None:
    # Given a client on leader A (epoch 5), which holds the submission without answering
    a, b = leaders("a", 5), leaders("b", 6)
    discovery.announce = a.announce
    async with Client(discovery.address, **QUICK) as client:
        a.silent = True
        started = time.monotonic()
        sending = asyncio.ensure_future(client.apply_async("add", (1, 2), task_id="t-1"))
        await asyncio.to_thread(a.wait_received, 1)
        # When A dies, and B announces itself a moment later
        a.close()
        await announce_after_probe(discovery, b.announce)
        # Then the same submission is accepted by B, under the same id, within the timeout
        assert await asyncio.wait_for(sending, 10) == "t-1"
    assert b.task_ids == ["t-1"]
    assert time.monotonic() - started < QUICK["timeout"]


def test_a_sync_submission_in_flight_when_the_leader_dies_is_accepted_by_its_successor(
    discovery: FakeDiscovery, leaders: Callable[[str, int], FakeLeader]
) -> None:
    a, b = leaders("a", 5), leaders("b", 6)
    discovery.announce = a.announce
    with SyncClient(discovery.address, **QUICK) as client, ThreadPoolExecutor(1) as pool:
        a.silent = True
        started = time.monotonic()
        sending = pool.submit(client.delay, "add", 1, 2)
        a.wait_received(1)
        (task_id,) = a.task_ids
        a.close()
        discovery.wait_probes(discovery.probes + 1)
        discovery.announce = b.announce
        assert sending.result(10) == task_id
    assert b.task_ids == [task_id]
    assert time.monotonic() - started < QUICK["timeout"]


@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_a_deposed_leader_answering_unavailable_sends_the_client_to_its_successor(
    discovery: FakeDiscovery, leaders: Callable[[str, int], FakeLeader], flavour: str
) -> None:
    # Given a client on leader A (epoch 5), and A deposed: it answers unavailable
    a, b = leaders("a", 5), leaders("b", 6)
    discovery.announce = a.announce
    async with opened(flavour, discovery.address) as client:
        a.deposed = True
        # When a call is made, and B announces itself once the client looks for a leader
        calling = asyncio.ensure_future(client.list_workers())
        await announce_after_probe(discovery, b.announce)
        # Then the call is answered by B, after A refused it
        assert await asyncio.wait_for(calling, 10) == []
    assert a.of_kind(ListWorkers)
    assert b.of_kind(ListWorkers)


async def test_a_held_wait_goes_on_at_the_successor_for_what_is_left_of_it(
    discovery: FakeDiscovery, leaders: Callable[[str, int], FakeLeader]
) -> None:
    a, b = leaders("a", 5), leaders("b", 6)
    discovery.announce = a.announce
    async with Client(discovery.address, **QUICK) as client:
        # Given a client on leader A holding a wait for a task
        a.silent = True
        waiting = asyncio.ensure_future(client.wait_result("t-1", timeout=8.0))
        await asyncio.to_thread(a.wait_received, 1)
        # When A dies and B announces itself
        a.close()
        await announce_after_probe(discovery, b.announce)
        # Then B is asked, to hold it for what is left of the 8 s (B knows no such task)
        with pytest.raises(TaskNotFound):
            await asyncio.wait_for(waiting, 10)
    (get,) = b.of_kind(Get)
    assert isinstance(get, Get)
    assert get.wait is not None
    assert get.wait < 8.0


# --- what is not followed ----------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_an_announcement_of_an_older_epoch_is_not_followed(
    discovery: FakeDiscovery, leaders: Callable[[str, int], FakeLeader], flavour: str
) -> None:
    # Given a client on leader A (epoch 5), A deposed, and only C (epoch 4) announced
    a, c = leaders("a", 5), leaders("c", 4)
    discovery.announce = a.announce
    async with opened(flavour, discovery.address, timeout=2.0, retries=1) as client:
        a.deposed = True
        discovery.announce = c.announce
        # When a call is made, then it fails at its deadline, and C was never asked
        started = time.monotonic()
        with pytest.raises(ControlPlaneUnavailable, match="unavailable"):
            await client.list_workers()
        assert time.monotonic() - started > 1.5
    assert c.received == []


async def test_a_discovery_peer_ignores_an_announcement_older_than_one_it_heard(
    discovery: FakeDiscovery, leaders: Callable[[str, int], FakeLeader]
) -> None:
    a, b, c = leaders("a", 5), leaders("b", 6), leaders("c", 4)
    peer = DiscoveryPeer(discovery.address, CODEC)
    try:
        discovery.announce = a.announce
        assert (await peer.announcement(5.0)).instance_id == "a"

        def not_a(heard: Announce) -> bool:  # A may still be queued, from earlier probes
            return heard.instance_id != "a"

        discovery.announce = c.announce
        probes = discovery.probes
        assert await peer.heard(not_a, 0.6) is None
        assert discovery.probes > probes  # C was announced in answer, and not heard
        discovery.announce = b.announce
        heard = await peer.heard(not_a, 5.0)
        assert heard is not None
        assert heard.instance_id == "b"
    finally:
        await peer.aclose()


@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_with_a_control_plane_alone_a_lost_one_fails_after_connect_timeout_as_before(
    discovery: FakeDiscovery, leaders: Callable[[str, int], FakeLeader], flavour: str
) -> None:
    # Given a client on A, a control plane alone (epoch 0), and B (epoch 0) announced
    a, b = leaders("a", 0), leaders("b", 0)
    discovery.announce = a.announce
    async with opened(flavour, discovery.address, timeout=10.0, connect_timeout=0.5) as client:
        a.close()
        discovery.announce = b.announce
        started = time.monotonic()
        # When a call is made, then it fails after connect_timeout, without trying B
        with pytest.raises(ControlPlaneUnavailable):
            await client.list_workers()
    assert time.monotonic() - started < 2.0
    assert b.received == []


@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_with_no_new_leader_a_call_fails_at_its_deadline(
    discovery: FakeDiscovery, leaders: Callable[[str, int], FakeLeader], flavour: str
) -> None:
    # Given a client on leader A (epoch 5), A dead and still announced (a lagging replica)
    a = leaders("a", 5)
    discovery.announce = a.announce
    async with opened(flavour, discovery.address, timeout=2.0, connect_timeout=0.5) as client:
        a.close()
        started = time.monotonic()
        # When a call is made, then it looks for a leader until its deadline, and fails
        with pytest.raises(ControlPlaneUnavailable):
            await client.list_workers()
        elapsed = time.monotonic() - started
    assert 1.5 < elapsed < 2.0 + 0.75


@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_a_leader_that_answered_then_stopped_is_followed_not_reported(
    discovery: FakeDiscovery, leaders: Callable[[str, int], FakeLeader], flavour: str
) -> None:
    # Given a client that A (epoch 5) answered, then A stopped
    a, b = leaders("a", 5), leaders("b", 6)
    discovery.announce = a.announce
    async with opened(flavour, discovery.address) as client:
        assert await client.list_workers() == []
        a.close()
        # When a call is made, and B is elected while the client looks for a leader
        calling = asyncio.ensure_future(client.list_workers())
        await announce_after_probe(discovery, b.announce)
        # Then B answers it: a stop with a successor is no "stopped answering"
        assert await asyncio.wait_for(calling, 10) == []
    assert b.of_kind(ListWorkers)


@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_a_leader_that_answered_then_stopped_with_no_successor_stopped_answering(
    discovery: FakeDiscovery, leaders: Callable[[str, int], FakeLeader], flavour: str
) -> None:
    # Given a client that A (epoch 5) answered, then A stopped and no replica took over
    a = leaders("a", 5)
    discovery.announce = a.announce
    async with opened(flavour, discovery.address, timeout=2.0, connect_timeout=0.5) as client:
        assert await client.list_workers() == []
        a.close()
        started = time.monotonic()
        # When a call is made, then at its deadline it says A stopped, and no one else answered
        with pytest.raises(ControlPlaneUnavailable) as raised:
            await client.list_workers()
        elapsed = time.monotonic() - started
    message = str(raised.value)
    assert f"the control plane at {a.announce.submit[0]} stopped answering (last seen" in message
    assert "no other replica answered either" in message
    assert elapsed < 2.0 + 0.75


# --- several discovery addresses -----------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_a_client_finds_the_control_plane_on_the_second_discovery_address(
    discovery: FakeDiscovery, leaders: Callable[[str, int], FakeLeader], flavour: str
) -> None:
    a = leaders("a", 5)
    discovery.announce = a.announce
    async with opened(flavour, f"{nowhere()}, {discovery.address}") as client:
        assert await client.delay("add", 1, 2) in a.task_ids


@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_nobody_at_any_discovery_address_names_them_all(flavour: str) -> None:
    first, second = nowhere(), nowhere()
    with pytest.raises(ControlPlaneUnavailable) as raised:
        async with opened(flavour, f"{first},{second}", connect_timeout=0.5):
            pass
    assert first in str(raised.value)
    assert second in str(raised.value)


def answering(reply: bytes) -> Callable[[bytes], bytes | None]:
    return lambda _data: reply


def test_each_tls_discovery_address_is_checked_against_its_own_host(tmp_path: Path) -> None:
    # Given two replicas' TLS buses, whose certificates name different hosts
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    buses: list[Served] = []
    addresses = []
    for host in ("localhost", "127.0.0.1"):
        issued = ca.issue_cert(host)
        issued.cert_chain_pems[0].write_to_path(str(tmp_path / f"{host}.pem"))
        issued.private_key_pem.write_to_path(str(tmp_path / f"{host}.key"))
        own = TLS(cert_file=str(tmp_path / f"{host}.pem"), key_file=str(tmp_path / f"{host}.key"))
        address = f"tls+tcp://{host}:{free_port_block(1)}"
        bus = pynng.Bus0(listen=address, recv_timeout=POLL_MS, tls_config=own.listening())
        announce = CODEC.encode(Announce(instance_id=host, submit=[], results="", registration=""))
        buses.append(Served(bus, answering(announce)))
        addresses.append(address)
    heard: set[str] = set()

    def both(announce: Announce) -> bool:
        heard.add(announce.instance_id)
        return len(heard) == 2

    try:
        # When a peer dials both, then both answer it (each certificate was accepted)
        tls = TLS(ca_file=str(tmp_path / "ca.pem"))
        with BlockingBus(",".join(addresses), CODEC, tls) as bus:
            assert bus.heard(both, 10.0) is not None
    finally:
        for served in buses:
            served.close()
    assert heard == {"localhost", "127.0.0.1"}


def test_a_discovery_list_with_no_address_is_refused() -> None:
    with pytest.raises(ValueError, match="no discovery address"):
        Client(" , ")


# --- one move for many calls ------------------------------------------------------------------


async def test_fifty_calls_failing_together_move_the_client_once(
    discovery: FakeDiscovery,
    leaders: Callable[[str, int], FakeLeader],
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, b = leaders("a", 5), leaders("b", 6)
    discovery.announce = a.announce
    caplog.set_level(logging.INFO, logger="fastworker.client")
    async with Client(discovery.address, **QUICK) as client:
        a.silent = True
        calls = [asyncio.ensure_future(client.list_workers()) for _ in range(50)]
        await asyncio.to_thread(a.wait_received, 50)
        a.close()
        await announce_after_probe(discovery, b.announce)
        assert await asyncio.wait_for(asyncio.gather(*calls), 10) == [[]] * 50
    assert len(b.of_kind(ListWorkers)) == 50
    assert b.result_connections == 1
    assert caplog.text.count("following the new leader") == 1


def test_fifty_threads_failing_together_move_a_sync_client_once(
    discovery: FakeDiscovery,
    leaders: Callable[[str, int], FakeLeader],
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, b = leaders("a", 5), leaders("b", 6)
    discovery.announce = a.announce
    caplog.set_level(logging.INFO, logger="fastworker.client")
    with SyncClient(discovery.address, **QUICK) as client, ThreadPoolExecutor(50) as pool:
        a.silent = True
        calls = [pool.submit(client.list_workers) for _ in range(50)]
        a.wait_received(50)
        a.close()
        discovery.wait_probes(discovery.probes + 1)
        discovery.announce = b.announce
        assert [call.result(10) for call in calls] == [[]] * 50
    assert len(b.of_kind(ListWorkers)) == 50
    assert b.result_connections == 1
    assert caplog.text.count("following the new leader") == 1


# --- subworkers ----------------------------------------------------------------------------------


async def test_a_subworker_refused_by_a_deposed_leader_registers_with_its_successor(
    discovery: FakeDiscovery, leaders: Callable[[str, int], FakeLeader]
) -> None:
    # Given a deposed leader A still announced, and a subworker starting
    a, b = leaders("a", 5), leaders("b", 6)
    a.deposed = True
    discovery.announce = a.announce
    config = SubworkerConfig(discovery_address=f"{nowhere()},{discovery.address}", concurrency=1)
    worker = Subworker(config, TaskRegistry())
    running = asyncio.ensure_future(worker.run())
    try:
        # When A refuses its registration, and then B announces itself
        await asyncio.to_thread(a.wait_received, 1)
        assert a.of_kind(Register)
        discovery.announce = b.announce
        # Then it registers with B and runs, fetching from B
        await asyncio.to_thread(b.wait_received, 2)
        assert b.of_kind(Register)
        assert b.of_kind(Fetch)
        assert worker.registered
        assert not running.done()
    finally:
        worker.request_stop()
        await asyncio.wait_for(running, 10)


# --- both clients, one test body ---------------------------------------------------------------


class _Threaded:
    """A ``SyncClient`` whose calls run on a thread, awaitable like the async client's."""

    def __init__(self, client: SyncClient) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call


@contextlib.asynccontextmanager
async def opened(flavour: str, discovery: str, **options: Any) -> Any:
    settings = {**QUICK, **options}
    if flavour == "async":
        async with Client(discovery, **settings) as client:
            yield client
        return
    sync = SyncClient(discovery, **settings)
    await asyncio.to_thread(sync.start)
    try:
        yield _Threaded(sync)
    finally:
        await asyncio.to_thread(sync.stop)
