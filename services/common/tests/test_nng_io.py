"""Context I/O over real NNG sockets on loopback: replies taken at once and replies queued
behind others both arrive, and a closed context ends what it had pending. Conditions are
awaited with a deadline, never slept on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pynng
import pytest

from fastworker.testing import free_port_block
from fastworker_common.nng_io import ContextIO, Inbox, PendingSends

DEADLINE = 10.0


def free_address() -> str:
    return f"tcp://127.0.0.1:{free_port_block()}"


@pytest.fixture
async def rep() -> AsyncIterator[tuple[pynng.Socket, str, Inbox, PendingSends]]:
    address = free_address()
    sock = pynng.Rep0(listen=address)
    loop = asyncio.get_running_loop()
    try:
        yield sock, address, Inbox(loop), PendingSends(loop)
    finally:
        sock.close()


async def test_a_request_is_received_and_its_reply_sent_with_the_connection_it_came_on(
    rep: tuple[pynng.Socket, str, Inbox, PendingSends],
) -> None:
    # Given a REP context and a REQ peer
    sock, address, inbox, sends = rep
    context = ContextIO(sock.new_context(), inbox, sends)
    with pynng.Req0(dial=address, recv_timeout=int(DEADLINE * 1000)) as req:
        # When the peer asks
        await asyncio.to_thread(req.send, b"ping")
        data, pipe_id = await asyncio.wait_for(context.receive(), DEADLINE)
        # Then the request arrives with its pipe, and the reply goes back
        assert data == b"ping"
        assert pipe_id in {p.id for p in sock.pipes}
        pending = context.send(b"pong", pipe_id)
        if pending is not None:
            await asyncio.wait_for(pending, DEADLINE)
        assert await asyncio.to_thread(req.recv) == b"pong"
    context.close()


async def test_replies_sent_back_to_back_on_one_connection_all_arrive_in_order(
    rep: tuple[pynng.Socket, str, Inbox, PendingSends],
) -> None:
    # Given ten requests in flight from one peer, each received on its own context
    sock, address, inbox, sends = rep
    contexts = [ContextIO(sock.new_context(), inbox, sends) for _ in range(10)]
    with pynng.Req0(dial=address, recv_timeout=int(DEADLINE * 1000)) as req:
        asking = [req.new_context() for _ in contexts]
        for i, ctx in enumerate(asking):
            await asyncio.to_thread(ctx.send, str(i).encode())
        received = await asyncio.wait_for(
            asyncio.gather(*(c.receive() for c in contexts)), DEADLINE
        )
        # When every reply is sent at once (most queue behind the first on the connection)
        pending = [
            c.send(b"re:" + data, pipe) for c, (data, pipe) in zip(contexts, received, strict=True)
        ]
        await asyncio.wait_for(asyncio.gather(*(p for p in pending if p is not None)), DEADLINE)
        # Then each asker gets its own reply, and no send is left pending
        for i, ctx in enumerate(asking):
            assert await asyncio.to_thread(ctx.recv) == f"re:{i}".encode()
            ctx.close()
    assert len(sends) == 0
    assert not any(c.sending for c in contexts)
    for context in contexts:
        context.close()


async def test_closing_a_context_ends_its_pending_receive_with_closed(
    rep: tuple[pynng.Socket, str, Inbox, PendingSends],
) -> None:
    # Given a context waiting for a request that never comes
    sock, _, inbox, sends = rep
    context = ContextIO(sock.new_context(), inbox, sends)
    receiving = context.receive()
    # When it is closed
    context.close()
    # Then the receive ends with Closed, and so does any later one
    with pytest.raises(pynng.Closed):
        await asyncio.wait_for(receiving, DEADLINE)
    with pytest.raises(pynng.Closed):
        await context.receive()


async def test_try_receive_takes_what_has_arrived_and_never_waits(
    rep: tuple[pynng.Socket, str, Inbox, PendingSends],
) -> None:
    # Given a REP context and nothing sent yet
    sock, address, inbox, sends = rep
    context = ContextIO(sock.new_context(), inbox, sends)
    # Then there is nothing to take, at once
    assert context.try_receive() is None
    with pynng.Req0(dial=address, recv_timeout=int(DEADLINE * 1000)) as req:
        # When a request arrives (the socket's receive descriptor says so)
        readable = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_reader(sock.recv_fd, readable.set)
        try:
            await asyncio.to_thread(req.send, b"ping")
            await asyncio.wait_for(readable.wait(), DEADLINE)
        finally:
            loop.remove_reader(sock.recv_fd)
        # Then it is taken with its connection, and the reply goes back on the context
        received = context.try_receive()
        assert received is not None
        data, pipe_id = received
        assert data == b"ping"
        assert pipe_id in {p.id for p in sock.pipes}
        assert context.try_receive() is None  # nothing more
        pending = context.send(b"pong", pipe_id)
        if pending is not None:
            await asyncio.wait_for(pending, DEADLINE)
        assert await asyncio.to_thread(req.recv) == b"pong"
    context.close()
    with pytest.raises(pynng.Closed):
        context.try_receive()
