"""The REP server with real NNG sockets on loopback: a request whose peer hangs up is let go,
a peer that does not read its replies is cut off, and neither stops anyone else being
served. Conditions are polled with a deadline, never slept on."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pynng
import pytest

from fastworker.testing import free_port_block
from fastworker_control_plane.servers.reply_server import ReplyServer
from fastworker_protocol import Codec, Get, Message, Results, TaskResult, TaskState

MAX_IDLE = 16  # contexts the server keeps waiting for requests (reply_server._MAX_IDLE)


async def until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@dataclass
class Served:
    server: ReplyServer
    socket: pynng.Socket
    address: str
    port: int
    codec: Codec
    entered: int = 0
    cancelled: int = 0


Behaviour = Callable[[Served, Message], Awaitable[Message]]


@pytest.fixture
def behaviour() -> Behaviour:
    async def answer(served: Served, message: Message) -> Message:
        return Results(results=[])

    return answer


@pytest.fixture
async def served(behaviour: Behaviour, request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    port = free_port_block()
    address = f"tcp://127.0.0.1:{port}"
    sock = pynng.Rep0(listen=address, async_backend="asyncio")
    options = getattr(request, "param", {})
    codec = Codec(options.get("max_message_size", 1 << 20))
    state: list[Served] = []

    async def handler(message: Message, pipe_id: int) -> Message:
        state[0].entered += 1
        try:
            return await behaviour(state[0], message)
        except asyncio.CancelledError:
            state[0].cancelled += 1
            raise

    server = ReplyServer("test", sock, codec, handler, (Get,), **options.get("server", {}))
    state.append(Served(server, sock, address, port, codec))
    server.start()
    yield state[0]
    await server.close(grace=0.5)


async def ask(served: Served) -> Message:
    with pynng.Req0(dial=served.address, recv_timeout=5000, async_backend="asyncio") as req:
        await req.asend(served.codec.encode(Get(task_ids=["t"])))
        return served.codec.decode(await req.arecv())


def never_reading_peer(port: int) -> socket.socket:
    """An SP REQ peer speaking the wire by hand, so it can stop reading altogether."""
    peer = socket.create_connection(("127.0.0.1", port))
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    peer.sendall(b"\x00SP\x00\x00\x30\x00\x00")  # REQ (0x30) handshake, PROTOCOL.md section 3
    assert peer.recv(8)[:4] == b"\x00SP\x00"
    return peer


def send_requests(peer: socket.socket, body: bytes, count: int) -> None:
    """``count`` requests in one write: the server may cut the connection as soon as it
    has read a few of them, and a later write would then fail."""
    frames = []
    for request_id in range(1, count + 1):
        payload = struct.pack(">I", 0x80000000 | request_id) + body
        frames.append(struct.pack(">Q", len(payload)) + payload)
    peer.sendall(b"".join(frames))


async def hold_waits(served: Served, message: Message) -> Message:
    """Holds a ``get`` with ``wait`` for ever (as if its task never ended); answers others."""
    assert isinstance(message, Get)
    if message.wait is not None:
        await asyncio.Event().wait()
    return Results(results=[])


@pytest.mark.parametrize("behaviour", [hold_waits])
async def test_requests_whose_peer_hung_up_are_cancelled_and_serving_goes_on(
    served: Served,
) -> None:
    # Given 200 peers that each sent a request the handler holds, then went away
    for n in range(1, 201):
        with pynng.Req0(dial=served.address, async_backend="asyncio") as req:
            await req.asend(served.codec.encode(Get(task_ids=["t"], wait=3600)))
            await until(lambda n=n: served.entered == n, "the request to be handled")  # type: ignore[misc]
    # Then every handler is cancelled, and nothing is held for them
    await until(lambda: served.cancelled == 200, "200 handlers cancelled")
    assert served.server.connections.handlers == 0
    # And the contexts went back to a few idle ones, none left answering, which still answer
    await until(lambda: served.server.contexts <= MAX_IDLE, "surplus contexts closed")
    assert served.server.idle == served.server.contexts
    assert isinstance(await ask(served), Results)


def big_reply(size: int) -> Behaviour:
    async def answer(served: Served, message: Message) -> Message:
        result = TaskResult(task_id="t", name="n", status=TaskState.SUCCESS, result=b"x" * size)
        return Results(results=[result])

    return answer


@pytest.mark.parametrize(
    ("behaviour", "served"),
    [
        # 256 KiB replies, at most 2 MiB of them queued: the byte bound cuts first
        (big_reply(256 * 1024), {"max_message_size": 1 << 20}),
        # 64 KiB replies, at most 5 of them queued: the count bound cuts first
        (big_reply(64 * 1024), {"max_message_size": 16 << 20, "server": {"max_queued_replies": 5}}),
    ],
    indirect=["served"],
    ids=["bytes", "count"],
)
async def test_a_peer_that_never_reads_its_replies_is_cut_off(served: Served) -> None:
    # Given a peer that sends 400 requests on one connection and reads nothing
    peer = never_reading_peer(served.port)
    try:
        await until(lambda: len(served.socket.pipes) == 1, "the connection")
        pipe_id = served.socket.pipes[0].id
        body = served.codec.encode(Get(task_ids=["t"]))
        await asyncio.to_thread(send_requests, peer, body, 400)
        # Then the server gives up on that connection rather than queue replies for it
        await until(lambda: served.server.connections.is_gone(pipe_id), "the cut", 20)
        assert served.server.connections.handlers == 0
        # And has closed it: what the peer reads ends (a few replies the kernel held first)
        assert await asyncio.to_thread(read_to_the_end, peer) < 16 << 20
        # And everyone else is still answered
        assert isinstance(await ask(served), Results)
    finally:
        peer.close()


def read_to_the_end(peer: socket.socket) -> int:
    """Bytes read until the other side closes (fails if it does not within 10 s)."""
    peer.settimeout(10)
    total = 0
    try:
        while chunk := peer.recv(1 << 20):
            total += len(chunk)
    except ConnectionResetError:
        pass
    return total


async def test_a_peer_that_reads_gets_every_reply_however_many_it_asks_at_once(
    served: Served,
) -> None:
    # Given one connection with 2,000 requests in flight at once (one context each)
    with pynng.Req0(dial=served.address, async_backend="asyncio") as req:
        req.resend_time = -1

        async def one() -> Message:
            with req.new_context() as context:
                await context.asend(served.codec.encode(Get(task_ids=["t"])))
                return served.codec.decode(await context.arecv())

        replies = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(2000))), 30)
    # Then each got its reply: none is cut off for asking much
    assert all(isinstance(r, Results) for r in replies)


async def test_serving_that_fails_with_an_error_is_reported_as_a_fault_and_serving_goes_on(
    served: Served,
) -> None:
    # Given a server whose replying breaks, once, with something no server expects
    faults: list[BaseException] = []
    served.server.on_fault = faults.append
    reply = served.server._reply

    def broken_once(*args: object) -> None:
        served.server._reply = reply  # type: ignore[method-assign]
        raise RuntimeError("a bug in replying")

    served.server._reply = broken_once  # type: ignore[method-assign,assignment]  # the bug
    # When a request comes in, Then the fault is reported (never lost silently)
    with pynng.Req0(dial=served.address, async_backend="asyncio") as req:
        await req.asend(served.codec.encode(Get(task_ids=["t"])))
        await until(lambda: bool(faults), "the fault")
    assert [str(f) for f in faults] == ["a bug in replying"]
    # And the next request is answered
    assert isinstance(await ask(served), Results)
