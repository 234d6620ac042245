"""The subworker's REQ channel to the control plane's registration port: requests one
after another (a held ``fetch`` and the one carrying outcomes may overlap), each on a
context of its own, with the client SDK's errors.

It is the SDK's ``RequestChannel`` with cheaper I/O (``nng_io``): a request NNG takes at
once costs no trip back from an NNG thread, and contexts are kept for the next request
instead of opened per request. A fetch is on the path of every task, so this matters.
NNG's own resend is off: a request is never sent twice behind the subworker's back.
"""

from __future__ import annotations

import asyncio
import time
from typing import TypeVar

import msgspec
import pynng

from fastworker_common.errors import ControlPlaneUnavailable, Timeout, nobody_at, rejection
from fastworker_common.nng_io import ContextIO, Inbox, PendingSends
from fastworker_common.sightings import Peer
from fastworker_common.tls import TLS, dial_config
from fastworker_protocol import Codec, DecodeError, Error, Message

M = TypeVar("M", bound=Message)

_NO_RESEND = -1  # NNG_DURATION_INFINITE: never resend on our behalf
_KEPT = 4  # idle contexts kept for the next requests


class RequestChannel:
    def __init__(self, address: str, codec: Codec, auth: str | None, tls: TLS | None) -> None:
        self.address = address
        self._peer = Peer(address)  # its last reply, to tell "stopped answering" from "never"
        self._codec = codec
        self._auth = auth
        # Twice the codec's limit: a frame between the two gets a typed error from the codec.
        self._socket = pynng.Req0(
            recv_max_size=2 * codec.max_message_size, tls_config=dial_config(address, tls)
        )
        self._socket.resend_time = _NO_RESEND
        self._socket.reconnect_time_min = 50
        self._socket.reconnect_time_max = 1000
        self._socket.dial(address, block=False)
        self._io: tuple[Inbox, PendingSends] | None = None
        self._idle: list[ContextIO] = []
        self._closed = False

    @property
    def connected(self) -> bool:
        return bool(self._socket.pipes)

    async def request(self, message: Message, reply_type: type[M], timeout: float) -> M:
        """Send ``message`` and return its reply. Error replies raise ``RequestRejected``
        (or a subclass); no reply within ``timeout`` raises ``Timeout`` if connected, else
        ``ControlPlaneUnavailable``; a message too large raises ``EncodeError`` before
        anything is sent."""
        if self._auth is not None:
            message = msgspec.structs.replace(message, auth=self._auth)
        data = self._codec.encode(message)
        try:
            context = self._context()
        except pynng.Closed as exc:  # closed meanwhile: this worker moved to a new leader
            raise ControlPlaneUnavailable(f"the connection to {self.address} was closed") from exc
        reply_bytes = await self._exchange(context, data, timeout)
        self._peer.answered(time.monotonic())
        try:
            reply = self._codec.decode(reply_bytes)
        except DecodeError as exc:
            raise ControlPlaneUnavailable(
                f"{self.address} sent an unreadable reply: {exc}"
            ) from exc
        if isinstance(reply, Error):
            raise rejection(reply.code, reply.message)
        if not isinstance(reply, reply_type):
            raise ControlPlaneUnavailable(
                f"{self.address} replied {type(reply).__name__}, expected {reply_type.__name__}"
            )
        return reply

    async def _exchange(self, context: ContextIO, data: bytes, timeout: float) -> bytes:
        loop = asyncio.get_running_loop()
        reusable = False
        try:
            try:
                context.send(data, 0)  # a send NNG has not taken yet is polled meanwhile
                receiving = context.receive()
            except pynng.NNGException as exc:
                raise ControlPlaneUnavailable(
                    f"connection to {self.address} failed: {exc}"
                ) from exc
            expired: list[bool] = []

            def give_up() -> None:
                expired.append(True)
                receiving.cancel()

            timer = loop.call_later(timeout, give_up)
            try:
                reply, _ = await receiving
            except asyncio.CancelledError:
                if expired:
                    raise self._no_reply(timeout) from None
                raise
            except pynng.Closed as exc:
                raise ControlPlaneUnavailable(
                    f"the connection to {self.address} was closed"
                ) from exc
            except pynng.NNGException as exc:
                raise ControlPlaneUnavailable(
                    f"connection to {self.address} failed: {exc}"
                ) from exc
            finally:
                timer.cancel()
            reusable = context.finish_send()
            return reply
        finally:
            if reusable and not self._closed and len(self._idle) < _KEPT:
                self._idle.append(context)
            else:
                # Closing aborts whatever the context still has pending.
                context.close()

    def _no_reply(self, timeout: float) -> Exception:
        if not self.connected:
            return ControlPlaneUnavailable(
                self._peer.unreachable(nobody_at(self.address), time.monotonic())
            )
        return Timeout(f"no reply from {self.address} within {timeout:g} s")

    def _context(self) -> ContextIO:
        if self._idle:
            return self._idle.pop()
        if self._io is None:
            loop = asyncio.get_running_loop()
            self._io = Inbox(loop), PendingSends(loop)
        return ContextIO(self._socket.new_context(), *self._io)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            for context in self._idle:
                context.close()
            self._idle.clear()
            self._socket.close()
