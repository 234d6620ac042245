"""Discovery peer: dials the control plane's BUS and learns its addresses from ``Announce``.

The control plane announces every 2 s; a peer that has just connected also sends a
``Probe`` so it need not wait for the next tick. Anything on the bus that is not an
``Announce`` is ignored: the bus carries no requests, so there is nobody to answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pynng
from fastworker_protocol import Announce, Codec, DecodeError, Probe

from fastworker.errors import ControlPlaneUnavailable

_PROBE_INTERVAL = 0.25


class DiscoveryPeer:
    """A BUS socket dialed to one discovery address."""

    def __init__(self, address: str, codec: Codec, role: str = "client") -> None:
        self.address = address
        self._codec = codec
        self._probe = codec.encode(Probe(role=role))
        self._socket = pynng.Bus0(recv_max_size=codec.max_message_size)
        self._socket.reconnect_time_min = 50
        self._socket.reconnect_time_max = 1000
        self._socket.dial(address, block=False)

    async def announcement(self, timeout: float) -> Announce:
        """The first announcement heard within ``timeout`` seconds, probing meanwhile."""
        try:
            return await asyncio.wait_for(self._first_announcement(), timeout)
        except TimeoutError:
            raise ControlPlaneUnavailable(
                f"no control plane announced itself on {self.address} within {timeout:g} s: "
                "is it running? (start one with `fastworker control-plane`)"
            ) from None

    async def _first_announcement(self) -> Announce:
        while True:
            self._send_probe()
            with contextlib.suppress(asyncio.TimeoutError):
                return await asyncio.wait_for(self._next_announcement(), _PROBE_INTERVAL)

    async def announcements(self) -> AsyncIterator[Announce]:
        """Every announcement from now on (probing once first), until the peer is closed."""
        self._send_probe()
        while True:
            try:
                yield await self._next_announcement()
            except pynng.Closed:
                return

    async def _next_announcement(self) -> Announce:
        while True:
            data = await self._socket.arecv()
            try:
                message = self._codec.decode(data)
            except DecodeError:
                continue
            if isinstance(message, Announce):
                return message

    def _send_probe(self) -> None:
        with contextlib.suppress(pynng.TryAgain):
            self._socket.send(self._probe, block=False)

    def close(self) -> None:
        self._socket.close()
