"""Discovery peer: dials the control plane's BUS and learns its addresses from ``Announce``.

The control plane announces every 2 s; a peer that has just connected also sends a
``Probe`` so it need not wait for the next tick. Anything on the bus that is not an
``Announce`` is ignored: the bus carries no requests, so there is nobody to answer. A
discovery address may list several buses (replicated control planes, one each): the
socket dials them all, and ignores a stale announcement (see ``fastworker_common.leader``).

One receiver task reads the socket until it is closed; callers wait on a queue, never
on the socket, so giving up on a wait never has to cancel an NNG operation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pynng
from pynng.exceptions import check_err
from pynng.nng import to_char

from fastworker_common import nng_exit  # noqa: F401  (a clean exit with NNG objects left)
from fastworker_common.errors import ControlPlaneUnavailable, nothing_announced
from fastworker_common.leader import SETTLE, addresses, stale, succeeds
from fastworker_common.tls import TLS, dial_config
from fastworker_protocol import Announce, Codec, DecodeError, Probe

_PROBE_INTERVAL = 0.25
_BACKLOG = 16
_POLL = 0.1  # seconds between looks at whether the leader's connection is back

Accept = Callable[[Announce], bool]


def dial_bus(discovery: str, codec: Codec, tls: TLS | None, *, asynchronous: bool) -> pynng.Bus0:
    """A BUS socket dialing every address of ``discovery`` in the background."""
    bus = pynng.Bus0(
        recv_max_size=2 * codec.max_message_size,
        **({"async_backend": "asyncio"} if asynchronous else {}),
    )
    bus.reconnect_time_min = 50
    bus.reconnect_time_max = 1000
    try:
        for address in addresses(discovery):
            _dial(bus, address, tls)
    except BaseException:
        bus.close()
        raise
    return bus


def _dial(bus: pynng.Bus0, address: str, tls: TLS | None) -> None:
    """Dial ``address`` with a TLS config of its own: each replica's certificate is checked
    against its own host (one set on the socket would name one host for all)."""
    config = dial_config(address, tls)
    if config is None:
        bus.dial(address, block=False)
        return
    dialer = pynng.ffi.new("nng_dialer *")
    check_err(pynng.lib.nng_dialer_create(dialer, bus.socket, to_char(address)))
    check_err(pynng.lib.nng_dialer_set_ptr(dialer[0], b"tls-config", config._tls_config))
    check_err(pynng.lib.nng_dialer_start(dialer[0], pynng.lib.NNG_FLAG_NONBLOCK))


class DiscoveryPeer:
    """A BUS socket dialed to the discovery address(es). Use within a running event loop."""

    def __init__(
        self, address: str, codec: Codec, role: str = "client", tls: TLS | None = None
    ) -> None:
        self.address = address
        self.epoch = 0  # the highest heard: an announcement of a lower one is stale
        self._codec = codec
        self._probe = codec.encode(Probe(role=role))
        self._socket = dial_bus(address, codec, tls, asynchronous=True)
        self._heard: asyncio.Queue[Announce | None] = asyncio.Queue(_BACKLOG)
        self._ended = False
        self._receiver = asyncio.get_running_loop().create_task(self._receive())

    async def announcement(self, timeout: float, connect_timeout: float | None = None) -> Announce:
        """The next announcement heard within ``timeout`` seconds, probing meanwhile; with
        ``connect_timeout``, give up sooner if the bus has not connected by then."""
        connect_for = timeout if connect_timeout is None else min(timeout, connect_timeout)
        heard = await self._listen(lambda _: True, timeout, connect_for)
        if heard is None:
            connected = bool(self._socket.pipes)
            within = timeout if connected else connect_for
            message = nothing_announced(self.address, within, connected=connected)
            raise ControlPlaneUnavailable(message)
        return heard

    async def heard(self, accept: Accept, timeout: float) -> Announce | None:
        """The next announcement ``accept`` takes, heard within ``timeout`` seconds while
        probing; ``None`` if none (or the peer was closed)."""
        return await self._listen(accept, timeout, timeout)

    @property
    def ended(self) -> bool:
        """Whether the socket was closed (nothing more will be heard)."""
        return self._ended

    async def announcements(self) -> AsyncIterator[Announce]:
        """Every announcement from now on (probing once first), until the peer is closed."""
        self._send_probe()
        while not self._ended and (heard := await self._heard.get()) is not None:
            yield heard
        self._ended = True

    async def _listen(self, accept: Accept, timeout: float, connect_for: float) -> Announce | None:
        """The first announcement ``accept`` takes within ``timeout``, probing every
        ``_PROBE_INTERVAL`` (not at every announcement: replicas all answer a probe);
        ``None`` if none, or if the bus is still unconnected after ``connect_for``."""
        loop = asyncio.get_running_loop()
        start = next_probe = loop.time()
        while (now := loop.time()) - start < timeout and not self._ended:
            if now - start >= connect_for and not self._socket.pipes:
                return None
            if now >= next_probe:
                self._send_probe()
                next_probe = now + _PROBE_INTERVAL
            wait = min(start + timeout, next_probe) - now
            try:
                heard = await asyncio.wait_for(self._heard.get(), wait)
            except TimeoutError:
                continue
            if heard is None:
                self._ended = True
            elif accept(heard):
                return heard
        return None

    async def _receive(self) -> None:
        try:
            while True:
                data = await self._socket.arecv()
                try:
                    message = self._codec.decode(data)
                except DecodeError:
                    continue
                if isinstance(message, Announce) and not stale(message, self.epoch):
                    self.epoch = max(self.epoch, message.epoch)
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

    def close(self) -> None:
        """Close the socket, which ends the receiver (callable from any thread)."""
        self._socket.close()

    async def aclose(self) -> None:
        """Close the socket, and wait for the receiver to end."""
        self._socket.close()
        await asyncio.gather(self._receiver, return_exceptions=True)


class LeaderSearch:
    """One look at a time for the successor of the leader a client lost, shared by every
    call that lost it: each waits for it as long as its own deadline allows, and the look
    lasts as long as the latest of them. ``found`` moves the client to the successor
    (``False``: the client was stopped meanwhile)."""

    def __init__(
        self, address: str, codec: Codec, tls: TLS | None, found: Callable[[Announce], bool]
    ) -> None:
        self._address = address
        self._codec = codec
        self._tls = tls
        self._found = found
        self._task: asyncio.Task[bool] | None = None
        self._peer: DiscoveryPeer | None = None
        self._until = 0.0
        self._found_at = float("-inf")
        self._closed = False

    async def successor(
        self, current: Announce, until: float, back: Callable[[], bool] | None = None
    ) -> bool:
        """Whether a successor of ``current`` announced itself by ``until`` (loop time) and
        the client moved to it; this caller stops waiting sooner once ``back()``."""
        loop = asyncio.get_running_loop()
        while not self._closed and (left := until - loop.time()) > 0:
            task = self._task
            if task is None or task.done():  # none under way, or one that ended sooner
                self._until = until
                task = self._task = loop.create_task(self._look(current))
            else:  # the look under way is for ``current`` too: the client moves only with it
                self._until = max(self._until, until)
            await asyncio.wait((task,), timeout=left if back is None else min(left, _POLL))
            if task.done() and task.result():
                return True
            if back is not None and back():
                return False
        return False

    def look(self, current: Announce, until: float) -> None:
        """Begin a look for ``current``'s successor, lasting until ``until`` (loop time),
        without waiting for it: the leader's connection dropped, or a call got no reply.
        Calls that fail meanwhile join it (``successor``)."""
        if self._closed:
            return
        task = self._task
        if task is None or task.done():
            self._until = until
            task = self._task = asyncio.get_running_loop().create_task(self._look(current))
            task.add_done_callback(_retrieved)
        else:
            self._until = max(self._until, until)

    async def _look(self, current: Announce) -> bool:
        loop = asyncio.get_running_loop()
        peer = self._peer = DiscoveryPeer(self._address, self._codec, tls=self._tls)
        try:
            if (settle := self._found_at + SETTLE - loop.time()) > 0:
                await asyncio.sleep(settle)  # two "leaders" must not bounce a call to and fro
            while (left := self._until - loop.time()) > 0 and not peer.ended:
                heard = await peer.heard(lambda a: succeeds(a, current), left)
                if heard is not None:
                    self._found_at = loop.time()
                    return self._found(heard)
            return False
        finally:
            self._peer = None
            await peer.aclose()

    def close(self) -> None:
        """End a look under way (its callers get ``False``); callable from any thread."""
        self._closed = True
        if (peer := self._peer) is not None:
            peer.close()


def _retrieved(task: asyncio.Task[bool]) -> None:
    """A look no call waited for: its error is no one's (the calls look again)."""
    if not task.cancelled():
        task.exception()
