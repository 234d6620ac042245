"""Discovery announcer: the control plane's BUS listener on the discovery port.

Every subworker and client dials this socket, so the control plane is the hub of the bus
and its announcements reach every peer, on one host or across pods. A follower replica
announces its leader's addresses here (``update``), so any replica leads peers to it.
It announces every ``interval`` seconds and at once when a peer sends ``Probe``. Nothing
else on the bus is answered (a bus has no replies); undecodable frames are counted and
dropped.
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
        announce: Announce | None,
        interval: float = ANNOUNCE_INTERVAL,
    ) -> None:
        self._socket = socket
        self._codec = codec
        self._announcement: bytes | None = None
        self.update(announce)
        self._interval = interval
        self._announcing: asyncio.Task[None] | None = None
        self._listening: asyncio.Task[None] | None = None
        self.dropped = 0

    def start(self) -> dict[str, asyncio.Task[None]]:
        """Start announcing and listening; returns the two tasks by name, to supervise
        (each must run until ``close``)."""
        loop = asyncio.get_running_loop()
        self._announcing = loop.create_task(self._announce_loop())
        self._listening = loop.create_task(self._listen())
        return {"discovery announcements": self._announcing, "discovery probes": self._listening}

    async def close(self) -> None:
        self._socket.close()  # ends the listener's receive: no NNG operation is cancelled
        tasks = [t for t in (self._announcing, self._listening) if t is not None]
        if self._announcing is not None:
            self._announcing.cancel()  # it only sleeps between sends
        await asyncio.gather(*tasks, return_exceptions=True)

    def update(self, announce: Announce | None) -> None:
        """Announce ``announce`` from now on (None: nothing; a follower with no leader)."""
        encoded = None if announce is None else self._codec.encode(announce)
        if encoded != self._announcement:
            self._announcement = encoded
            self.announce()

    def announce(self) -> None:
        if self._announcement is None:
            return
        with contextlib.suppress(pynng.NNGException):
            self._socket.send(self._announcement, block=False)

    async def _announce_loop(self) -> None:
        while True:
            self.announce()
            await asyncio.sleep(self._interval)

    async def _listen(self) -> None:
        while True:
            try:
                data = await self._socket.arecv()
            except pynng.NNGException:
                return
            try:
                message = self._codec.decode(data)
            except DecodeError as exc:
                self.dropped += 1
                log.debug("dropped bus frame", code=exc.code)
                continue
            if isinstance(message, Probe):
                self.announce()
