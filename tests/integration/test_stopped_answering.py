"""A long-lived client whose control plane stops: the error names the control plane that
stopped answering and when it last answered, instead of sending the operator after a
network problem, and comes within the connect budget. A client that never reached it
keeps the advice about addresses.

Real processes: a control plane stopped by SIGTERM (it drains and exits) or SIGKILL (it
just vanishes), and clients of both flavours, each one having submitted once or not."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import pytest
from harness import Cluster

from fastworker import Client, ControlPlaneUnavailable, SyncClient

CONNECT_BUDGET = 1.0
# Each of a call's 4 attempts gets a quarter of its timeout: as much as the connect budget,
# so a submission sent in the instant before the client's NNG sees the connection go (the
# process has exited, its socket's close not yet read) ends no later.
TIMEOUT = 4 * CONNECT_BUDGET
MARGIN = 1.0  # a loaded machine


def client_of(flavour: str, discovery: str) -> Client | SyncClient:
    options: dict[str, Any] = {"timeout": TIMEOUT, "retries": 3, "connect_timeout": CONNECT_BUDGET}
    return Client(discovery, **options) if flavour == "async" else SyncClient(discovery, **options)


async def start(client: Client | SyncClient) -> None:
    if isinstance(client, Client):
        await client.start()
    else:
        await asyncio.to_thread(client.start)


async def submit(client: Client | SyncClient) -> Any:
    if isinstance(client, Client):
        return await client.delay("add", 1, 2)
    return await asyncio.to_thread(client.delay, "add", 1, 2)


async def stop(client: Client | SyncClient) -> None:
    if isinstance(client, Client):
        client.stop()
    else:
        await asyncio.to_thread(client.stop)


async def failure(client: Client | SyncClient) -> tuple[str, float]:
    """The ``ControlPlaneUnavailable`` a submission gets, and how long it took to come."""
    started = time.monotonic()
    with pytest.raises(ControlPlaneUnavailable) as raised:
        await submit(client)
    return str(raised.value), time.monotonic() - started


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_a_client_whose_control_plane_stopped_is_told_it_stopped_answering(
    cluster: Cluster, sig: signal.Signals
) -> None:
    # Given a control plane, clients of both flavours that submitted once through it, and
    # clients of both flavours that found it on discovery but never sent it anything
    plane = cluster.control_plane()
    async with cluster.client() as ready:
        await cluster.workers(ready, 1)
    flavours = ("async", "sync")
    answered = [client_of(f, cluster.discovery) for f in flavours]
    never = [client_of(f, cluster.discovery) for f in flavours]
    started: list[Client | SyncClient] = []
    try:
        for client in [*answered, *never]:
            await start(client)
            started.append(client)
        for client in answered:
            await submit(client)
        # When the control plane is stopped, and each submits again
        plane.signal(sig)
        plane.wait()
        told = [await failure(client) for client in answered]
        unsent = [await failure(client) for client in never]
    finally:
        for client in started:
            await stop(client)
    # Then those it answered hear that it stopped answering, within the connect budget
    address = f"tcp://127.0.0.1:{cluster.base_port}"
    for message, took in told:
        assert message.startswith(f"the control plane at {address} stopped answering"), message
        assert "(last seen " in message
        assert "--address" not in message
        assert took < CONNECT_BUDGET + MARGIN
    # And those it never answered keep the advice about addresses, as before
    for message, took in unsent:
        assert "cannot be reached from here" in message, message
        assert "stopped answering" not in message
        assert took < CONNECT_BUDGET + MARGIN
