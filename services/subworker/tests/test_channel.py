"""The subworker's REQ channel: a request on a channel closed meanwhile (the worker moved
to a new leader while a request was on its way) is an ordinary lost connection."""

from __future__ import annotations

import pytest

from fastworker import ControlPlaneUnavailable
from fastworker.testing import free_ports_apart
from fastworker_protocol import Codec, Drain, Registered
from fastworker_subworker.channel import RequestChannel


async def test_a_request_on_a_closed_channel_is_a_lost_connection_not_a_crash() -> None:
    (port,) = free_ports_apart(1)
    channel = RequestChannel(f"tcp://127.0.0.1:{port}", Codec(), None, None)
    channel.close()
    with pytest.raises(ControlPlaneUnavailable, match="was closed"):
        await channel.request(Drain(worker_id="w"), Registered, 1.0)
