"""A discovery address where a control plane listens but names no leader (a deposed
leader, a replica of a set with no leader elected) is reported as that, not as "nothing is
running": the client's bus connected, so something is there. Real NNG sockets: the silent
replica is a BUS socket that hears the client's probes and never announces."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pynng
import pytest

from fastworker import Client, ControlPlaneUnavailable, SyncClient
from fastworker.testing import free_port_block
from fastworker_common.errors import nothing_announced

LEADERLESS = "but named no leader within"


@pytest.fixture
def silent_replica() -> Iterator[str]:
    """The discovery address of a replica that knows no leader: it listens, announces
    nothing."""
    address = f"tcp://127.0.0.1:{free_port_block(1)}"
    with pynng.Bus0(listen=address):
        yield address


async def test_the_async_client_says_a_replica_listens_but_names_no_leader(
    silent_replica: str,
) -> None:
    started = time.monotonic()
    with pytest.raises(ControlPlaneUnavailable) as raised:
        async with Client(silent_replica, timeout=1.5, connect_timeout=0.5):
            pass
    assert f"a control plane listens at {silent_replica} {LEADERLESS}" in str(raised.value)
    assert "deposed leader" in str(raised.value)
    assert time.monotonic() - started < 1.5 + 1.0


def test_the_blocking_client_says_the_same(silent_replica: str) -> None:
    started = time.monotonic()
    with pytest.raises(ControlPlaneUnavailable) as raised:
        SyncClient(silent_replica, timeout=1.5, connect_timeout=0.5).start()
    assert f"a control plane listens at {silent_replica} {LEADERLESS}" in str(raised.value)
    assert time.monotonic() - started < 1.5 + 1.0


async def test_with_nothing_listening_the_advice_is_still_to_start_one() -> None:
    nowhere = f"tcp://127.0.0.1:{free_port_block(1)}"
    with pytest.raises(ControlPlaneUnavailable) as raised:
        async with Client(nowhere, timeout=1.5, connect_timeout=0.5):
            pass
    assert f"no control plane announced itself at {nowhere}" in str(raised.value)
    assert LEADERLESS not in str(raised.value)


def test_the_message_names_the_address_the_wait_and_where_to_look() -> None:
    said = nothing_announced("tcp://cp:5550", 3, connected=True)
    assert said.startswith(
        "a control plane listens at tcp://cp:5550 but named no leader within 3 s"
    )
    assert said.endswith("its log says which")
    assert nothing_announced("tcp://cp:5550", 3, connected=False).startswith(
        "no control plane announced itself at tcp://cp:5550 within 3 s"
    )
