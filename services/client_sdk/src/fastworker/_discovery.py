"""Discovery peer: dials the control plane's BUS and learns its addresses from ``Announce``.

The control plane announces every 2 s; a peer that has just connected also sends a
``Probe`` so it need not wait for the next tick. Anything on the bus that is not an
``Announce`` is ignored: the bus carries no requests, so there is nobody to answer.

One receiver task reads the socket until it is closed; callers wait on a queue, never
on the socket, so giving up on a wait never has to cancel an NNG operation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pynng

from fastworker.errors import ControlPlaneUnavailable, nobody_at
from fastworker.tls import TLS, dial_config
from fastworker_protocol import Announce, Codec, DecodeError, Probe

_PROBE_INTERVAL = 0.25
_BACKLOG = 16


class DiscoveryPeer:
    """A BUS socket dialed to one discovery address. Use within a running event loop."""

    def __init__(
        self, address: str, codec: Codec, role: str = "client", tls: TLS | None = None
    ) -> None:
        self.address = address
        self._codec = codec
        self._probe = codec.encode(Probe(role=role))
        self._socket = pynng.Bus0(
            recv_max_size=2 * codec.max_message_size,
            async_backend="asyncio",
            tls_config=dial_config(address, tls),
        )
        self._socket.reconnect_time_min = 50
        self._socket.reconnect_time_max = 1000
        self._socket.dial(address, block=False)
        self._heard: asyncio.Queue[Announce | None] = asyncio.Queue(_BACKLOG)
        self._receiver = asyncio.get_running_loop().create_task(self._receive())

    async def announcement(self, timeout: float, connect_timeout: float | None = None) -> Announce:
        """The next announcement heard within ``timeout`` seconds, probing meanwhile; with
        ``connect_timeout``, give up sooner if the bus has not connected by then."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if connect_timeout is not None and connect_timeout < timeout:
            connect_by = loop.time() + connect_timeout
        else:
            connect_by, connect_timeout = deadline, timeout
        while (left := deadline - loop.time()) > 0:
            if loop.time() >= connect_by and not self._socket.pipes:
                timeout = connect_timeout
                break
            self._send_probe()
            with contextlib.suppress(TimeoutError):
                heard = await asyncio.wait_for(self._heard.get(), min(left, _PROBE_INTERVAL))
                if heard is not None:
                    return heard
                break  # closed
        raise ControlPlaneUnavailable(nobody_at(self.address, "announced itself", within=timeout))

    async def announcements(self) -> AsyncIterator[Announce]:
        """Every announcement from now on (probing once first), until the peer is closed."""
        self._send_probe()
        while (heard := await self._heard.get()) is not None:
            yield heard

    async def _receive(self) -> None:
        try:
            while True:
                data = await self._socket.arecv()
                try:
                    message = self._codec.decode(data)
                except DecodeError:
                    continue
                if isinstance(message, Announce):
                    if self._heard.full():  # keep the newest: drop the oldest
                        self._heard.get_nowait()
                    self._heard.put_nowait(message)
        except pynng.NNGException:
            pass
        finally:
            if self._heard.full():
                self._heard.get_nowait()
            self._heard.put_nowait(None)

    def _send_probe(self) -> None:
        with contextlib.suppress(pynng.NNGException):
            self._socket.send(self._probe, block=False)

    async def aclose(self) -> None:
        """Close the socket, which ends the receiver."""
        self._socket.close()
        await asyncio.gather(self._receiver, return_exceptions=True)
