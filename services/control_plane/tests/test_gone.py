"""Telling a leader whose process is gone from one that is out of reach: only a refused
connection, twice, is proof."""

from __future__ import annotations

import asyncio
import socket

from fastworker.testing import free_ports_apart
from fastworker_control_plane.ha.gone import host_and_port, nothing_listens


def test_addresses_are_read_as_host_and_port_or_not_at_all() -> None:
    assert host_and_port("tcp://10.0.0.7:5561") == ("10.0.0.7", 5561)
    assert host_and_port("tls+tcp://cp-a.example:5561") == ("cp-a.example", 5561)
    assert host_and_port("tcp://[::1]:5561") == ("::1", 5561)
    assert host_and_port("ipc:///tmp/replication.sock") is None
    assert host_and_port("tcp://cp-a") is None
    assert host_and_port("tcp://cp-a:99999") is None


async def test_a_port_nothing_listens_on_is_proof_the_process_is_gone() -> None:
    (port,) = free_ports_apart(1)
    assert await nothing_listens(f"tcp://127.0.0.1:{port}")


async def test_a_port_something_listens_on_is_no_proof() -> None:
    (port,) = free_ports_apart(1)
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", port)
    try:
        assert not await nothing_listens(f"tcp://127.0.0.1:{port}")
    finally:
        server.close()
        await server.wait_closed()


async def test_a_listener_that_never_accepts_is_no_proof_either() -> None:
    # A full backlog looks like a host that does not answer: silence, not a refusal
    (port,) = free_ports_apart(1)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen(0)
        assert not await nothing_listens(f"tcp://127.0.0.1:{port}")


async def test_an_address_it_cannot_read_is_no_proof() -> None:
    assert not await nothing_listens("ipc:///tmp/replication.sock")
