"""Discovery announcer: the control plane's BUS listener on the discovery port.

Every subworker and client dials this socket, so the control plane is the hub of the bus
and its announcements reach every peer, on one host or across pods. It announces every
``interval`` seconds and at once when a peer sends ``Probe``. Nothing else on the bus is
answered (a bus has no replies); undecodable frames are counted and dropped.
"""

from __future__ import annotations

import asyncio
import contextlib

import pynng
import structlog
from fastworker_protocol import Announce, Codec, DecodeError, Probe

log = structlog.get_logger(__name__)

ANNOUNCE_INTERVAL = 2.0


class DiscoveryAnnouncer:
    def __init__(
        self,
        socket: pynng.Bus0,
        codec: Codec,
        announce: Announce,
        interval: float = ANNOUNCE_INTERVAL,
    ) -> None:
        self._socket = socket
        self._codec = codec
        self._announcement = codec.encode(announce)
        self._interval = interval
        self._tasks: list[asyncio.Task[None]] = []
        self.dropped = 0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._announce_loop()), loop.create_task(self._listen())]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._socket.close()

    def announce(self) -> None:
        with contextlib.suppress(pynng.TryAgain):
            self._socket.send(self._announcement, block=False)

    async def _announce_loop(self) -> None:
        while True:
            self.announce()
            await asyncio.sleep(self._interval)

    async def _listen(self) -> None:
        while True:
            try:
                data = await self._socket.arecv()
            except pynng.Closed:
                return
            try:
                message = self._codec.decode(data)
            except DecodeError as exc:
                self.dropped += 1
                log.debug("dropped bus frame", code=exc.code)
                continue
            if isinstance(message, Probe):
                self.announce()
