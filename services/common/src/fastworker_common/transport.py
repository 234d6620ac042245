"""REQ-side channel: one NNG REQ socket to one REP address, many requests in flight.

Every request gets its own NNG context, so concurrent requests on one socket are matched
to their own replies (the published 0.3 used the bare socket and mixed them up). NNG's own
resend is disabled: retrying is the caller's decision, and submissions are made safe to
retry by their task ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TypeVar

import msgspec
import pynng

from fastworker_common import nng_exit  # noqa: F401  (a clean exit with NNG objects left)
from fastworker_common.errors import ControlPlaneUnavailable, Timeout, nobody_at, rejection
from fastworker_common.sightings import Peer
from fastworker_common.tls import TLS, dial_config
from fastworker_protocol import Codec, DecodeError, Error, Message

M = TypeVar("M", bound=Message)

_NO_RESEND = -1  # NNG_DURATION_INFINITE: never resend on our behalf


class RequestChannel:
    """Sends requests to one REP address and returns decoded replies."""

    def __init__(
        self,
        address: str,
        codec: Codec,
        auth: str | None = None,
        tls: TLS | None = None,
        *,
        unreachable: str | None = None,
        peer: Peer | None = None,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        """``unreachable`` is the message for a control plane never connected (default:
        nobody answered at ``address``); ``peer``, the control plane whose replies are
        recorded, to tell one that stopped answering (default: ``address``, on its own);
        ``on_lost`` is called (in the running event loop) each time the last connection
        drops."""
        self.address = address
        self._unreachable = unreachable or nobody_at(address)
        self._peer = peer or Peer(address)
        self._codec = codec
        self._auth = auth  # the control plane's shared token, put in every request
        self._socket = dial_req(address, codec, tls)
        self._closed = False
        if on_lost is not None:
            loop = asyncio.get_running_loop()

            def removed(pipe: pynng.Pipe) -> None:  # an NNG thread, before pynng forgets it
                if not any(other.id != pipe.id for other in self._socket.pipes):
                    with contextlib.suppress(RuntimeError):  # the loop has closed
                        loop.call_soon_threadsafe(self._lost, on_lost)

            self._socket.add_post_pipe_remove_cb(removed)

    def _lost(self, on_lost: Callable[[], None]) -> None:
        if not self._closed:
            on_lost()

    @property
    def connected(self) -> bool:
        return bool(self._socket.pipes)

    async def request(
        self,
        message: Message,
        reply_type: type[M],
        timeout: float,
        connect_timeout: float | None = None,
    ) -> M:
        """Send ``message`` and return its reply, raising the SDK's errors.

        Error replies raise :class:`~fastworker_common.errors.RequestRejected` (or a subclass);
        no reply within ``timeout`` raises ``Timeout`` if a control plane is connected,
        else ``ControlPlaneUnavailable``, which comes after ``connect_timeout`` already if
        no connection is made by then. A message that cannot be sent (too large) raises
        the protocol's ``EncodeError`` before anything is sent.
        """
        data = self._codec.encode(with_auth(message, self._auth))
        if self._closed:  # stopped, or left for another leader
            raise ControlPlaneUnavailable(f"the connection to {self.address} was closed")
        context = self._socket.new_context()
        exchange = asyncio.ensure_future(_exchange(context, data))
        try:
            first = timeout
            if connect_timeout is not None and not self.connected:
                first = min(timeout, connect_timeout)
            await asyncio.wait((exchange,), timeout=first)
            if not exchange.done() and self.connected and first < timeout:
                await asyncio.wait((exchange,), timeout=timeout - first)
        finally:
            # Closing the context aborts its NNG operations, which then end ``exchange``
            # with ``Closed``; cancelling them instead is not reliable in pynng.
            if not exchange.done():
                exchange.add_done_callback(_discard_outcome)
            with contextlib.suppress(pynng.NNGException):
                context.close()
        if not exchange.done():
            if not self.connected:  # never reached, or it stopped answering
                lost = self._peer.unreachable(self._unreachable, time.monotonic())
                raise ControlPlaneUnavailable(lost)
            raise Timeout(f"no reply from {self.address} within {timeout:g} s")
        try:
            reply_bytes = exchange.result()
        except pynng.NNGException as exc:
            raise ControlPlaneUnavailable(f"connection to {self.address} failed: {exc}") from exc
        if reply_bytes is None:
            raise ControlPlaneUnavailable(f"the connection to {self.address} was closed")
        self._peer.answered(time.monotonic())
        return read_reply(self._codec, self.address, reply_bytes, reply_type)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._socket.close()


async def _exchange(context: pynng.Context, data: bytes) -> bytes | None:
    """The reply, or ``None`` if the context was closed first (we gave up waiting): an
    outcome, not an error, so a task still ending as the event loop stops reports nothing."""
    try:
        await context.asend(data)
        reply: bytes = await context.arecv()
    except pynng.Closed:
        return None
    return reply


def _discard_outcome(exchange: asyncio.Future[bytes | None]) -> None:
    if not exchange.cancelled():
        exchange.exception()


def dial_req(address: str, codec: Codec, tls: TLS | None) -> pynng.Req0:
    """A REQ socket dialing ``address`` in the background (redialing after a loss), which
    never resends a request by itself. Its asyncio backend is named, which spares pynng a
    sniffio lookup on every async send and receive; blocking calls ignore it."""
    socket = pynng.Req0(
        recv_max_size=nng_limit(codec),
        async_backend="asyncio",
        tls_config=dial_config(address, tls),
    )
    socket.resend_time = _NO_RESEND
    socket.reconnect_time_min = 50
    socket.reconnect_time_max = 1000
    socket.dial(address, block=False)
    return socket


def read_reply(codec: Codec, address: str, data: bytes, reply_type: type[M]) -> M:
    """The decoded reply from ``address``; an ``Error`` reply raises its SDK error
    (``unavailable``, a control plane that is not the leader, raises
    ``ControlPlaneUnavailable``), and so does a reply that does not decode or is of
    another type."""
    try:
        reply = codec.decode(data)
    except DecodeError as exc:
        raise ControlPlaneUnavailable(f"{address} sent an unreadable reply: {exc}") from exc
    if isinstance(reply, Error):
        raise rejection(reply.code, reply.message, address)
    if not isinstance(reply, reply_type):
        raise ControlPlaneUnavailable(
            f"{address} replied {type(reply).__name__}, expected {reply_type.__name__}"
        )
    return reply


def with_auth(message: M, auth: str | None) -> M:
    """``message`` carrying the control plane's shared token, if there is one."""
    return message if auth is None else msgspec.structs.replace(message, auth=auth)


def nng_limit(codec: Codec) -> int:
    """NNG's own frame limit: twice the codec's, so a frame between the two gets a typed
    ``oversize`` error from the codec, and only absurd frames drop the connection."""
    return 2 * codec.max_message_size
