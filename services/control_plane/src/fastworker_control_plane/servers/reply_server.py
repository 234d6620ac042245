"""Serving one REP socket through NNG contexts.

Every request is received, handled and answered on its own context, so a reply can only
ever go to the caller that asked, and a handler that holds its reply (a long-poll wait)
blocks nobody else. Receivers are elastic: there are always a few idle contexts waiting,
more are opened as requests arrive, and surplus ones close once they have answered.
Contexts do their I/O through ``nng_io``: a reply NNG takes at once costs no trip back
from an NNG thread, and receives come back to the event loop in batches.

Whatever arrives, the caller gets a reply: bytes that do not decode, ops this socket
does not serve and handler bugs all become ``Error`` messages with stable codes. With an
auth token, a request without it gets ``unauthorized`` before anything else about it is
looked at. Two exceptions, both about the connection rather than the request: a request
whose connection has closed is not answered (its handler is cancelled), and a connection
that lets too many replies pile up unread is closed (see ``connections``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import pynng
import structlog

from fastworker_common.nng_io import ContextIO, Inbox, PendingSends, close_pipe
from fastworker_common.tokens import Tokens
from fastworker_control_plane.reclaim import BULK
from fastworker_control_plane.servers.connections import Connections
from fastworker_control_plane.servers.responder import Handler, Responder
from fastworker_protocol import (
    Codec,
    Message,
)

log = structlog.get_logger(__name__)

_MIN_IDLE = 4
_MAX_IDLE = 16
# Replies queued for one connection that NNG has not taken yet. The bytes allow one reply
# of the largest size behind another; the count is far above what the SDK ever has queued
# (its replies are taken as fast as they come) and keeps a peer sending a flood of small
# requests without reading from holding thousands of contexts.
_MAX_QUEUED_MESSAGES = 2  # in units of max_message_size
_MAX_QUEUED_REPLIES = 10_000


class ReplyServer:
    def __init__(
        self,
        name: str,
        socket: pynng.Socket,
        codec: Codec,
        handler: Handler,
        serves: tuple[type[Message], ...],
        auth: str | Tokens | None = None,
        *,
        max_queued_replies: int = _MAX_QUEUED_REPLIES,
        fence: Callable[[], str | None] | None = None,
    ) -> None:
        self.name = name
        self._socket = socket
        self._codec = codec
        self._responder = Responder(name, codec, handler, serves, auth, fence)
        self.connections = Connections(
            _MAX_QUEUED_MESSAGES * codec.max_message_size, max_queued_replies
        )
        self._idle = 0
        self._receivers: set[asyncio.Task[None]] = set()
        self._contexts: set[ContextIO] = set()
        self._inbox: Inbox | None = None
        self._sends: PendingSends | None = None
        self._answering: set[asyncio.Task[None]] = set()
        self._closing = False
        # Told when a receiver dies of an error (the control plane's supervisor).
        self.on_fault: Callable[[BaseException], None] | None = None
        # Told when a closed connection dropped many held requests at once (``reclaim``).
        self.on_bulk_release: Callable[[], None] | None = None

    @property
    def idle(self) -> int:
        """Contexts waiting for a request."""
        return self._idle

    @property
    def contexts(self) -> int:
        """Contexts open: idle ones, and those answering a request."""
        return len(self._contexts)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._inbox, self._sends = Inbox(loop), PendingSends(loop)

        def removed(pipe: pynng.Pipe) -> None:  # on an NNG thread
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(self._pipe_closed, pipe.id)

        # Added to, not replacing, what the socket's owner listens to (app.py's registration).
        self._socket.add_post_pipe_remove_cb(removed)
        for _ in range(_MIN_IDLE):
            self._spawn()

    async def close(self, grace: float = 2.0) -> None:
        """Let requests being answered finish (up to ``grace`` seconds), then close.

        Contexts are closed rather than their receives cancelled: closing aborts NNG
        operations deterministically, where cancelling them is not reliable in pynng.
        """
        self._closing = True
        if self._answering:
            await asyncio.wait(list(self._answering), timeout=grace)
        for context in list(self._contexts):
            context.close()
        receivers = list(self._receivers)
        _, stuck = await asyncio.wait(receivers, timeout=grace) if receivers else ((), ())
        for receiver in stuck:
            receiver.cancel()
        await asyncio.gather(*receivers, return_exceptions=True)
        self._socket.close()

    def _spawn(self) -> None:
        if self._closing:
            return
        receiver = asyncio.get_running_loop().create_task(self._receive_loop())
        self._receivers.add(receiver)
        receiver.add_done_callback(self._receiver_ended)

    def _receiver_ended(self, receiver: asyncio.Task[None]) -> None:
        """Receivers come and go; one that dies of an error is a server bug, reported to
        ``on_fault`` (the control plane stops: it must not serve on half deaf)."""
        self._receivers.discard(receiver)
        if receiver.cancelled() or receiver.exception() is None or self._closing:
            return
        error = receiver.exception()
        assert error is not None
        if self.on_fault is not None:
            self.on_fault(error)
        else:
            log.error("receiver died", server=self.name, exc_info=error)

    async def _receive_loop(self) -> None:
        assert self._inbox is not None
        assert self._sends is not None
        context = ContextIO(self._socket.new_context(), self._inbox, self._sends)
        self._contexts.add(context)
        me = asyncio.current_task()
        assert me is not None
        try:
            while not self._closing:
                self._idle += 1
                try:
                    request, pipe_id = await context.receive()
                finally:
                    self._idle -= 1
                self._answering.add(me)
                if self._idle < _MIN_IDLE:
                    self._spawn()
                reply = await self._answer(request, pipe_id, me)
                # Let go of both before waiting for the next request: an idle context
                # kept its last ones alive (16 MB requests held 150 MB between them).
                del request
                if reply is not None:
                    await self._send(context, reply, pipe_id)
                del reply
                self._answering.discard(me)
                if self._idle >= _MAX_IDLE:
                    return
        except pynng.NNGException:
            return
        finally:
            self._answering.discard(me)
            self._contexts.discard(context)
            context.close()

    async def _answer(self, data: bytes, pipe_id: int, handler: asyncio.Task[None]) -> bytes | None:
        """The reply, or ``None`` when the request's connection is gone (then the handler
        is cancelled if it closes meanwhile, and nothing is answered)."""
        if pipe_id < 0:
            return await self.reply_to(data, pipe_id)
        if self.connections.is_gone(pipe_id):
            return None
        self.connections.handling(pipe_id, handler)
        try:
            return await self.reply_to(data, pipe_id)
        finally:
            self.connections.handled(pipe_id, handler)

    async def _send(self, context: ContextIO, reply: bytes, pipe_id: int) -> None:
        """Queue ``reply`` for its connection, unless that makes the connection's unread
        replies too many: then the connection is closed instead."""
        if pipe_id < 0:
            await _sent(context.send(reply, pipe_id))
            return
        if self.connections.is_gone(pipe_id):
            return
        size = len(reply)
        if not self.connections.fits(pipe_id, size):
            self._cut(pipe_id)
            return
        self.connections.queued(pipe_id, size)
        try:
            await _sent(context.send(reply, pipe_id))
        finally:
            self.connections.sent(pipe_id, size)

    def _cut(self, pipe_id: int) -> None:
        log.warning(
            "closing a connection that does not read its replies",
            server=self.name,
            pipe=pipe_id,
            peer=_peer(self._socket, pipe_id),
            max_replies=self.connections.max_replies,
            max_bytes=self.connections.max_bytes,
        )
        self._pipe_closed(pipe_id)  # at once: its other requests are not handled or sent
        close_pipe(pipe_id)

    def _pipe_closed(self, pipe_id: int) -> None:
        cancelled = self.connections.closed(pipe_id)
        if cancelled:
            log.debug("peer gone: requests dropped", server=self.name, pipe=pipe_id, n=cancelled)
        if cancelled >= BULK and self.on_bulk_release is not None:
            self.on_bulk_release()

    async def reply_to(self, data: bytes, pipe_id: int) -> bytes:
        """The encoded reply to one request's bytes. Never raises (but for cancellation)."""
        return await self._responder.reply_to(data, pipe_id)


async def _sent(pending: asyncio.Future[None] | None) -> None:
    """Wait for a send NNG did not take at once (most are taken inside the call)."""
    if pending is not None:
        await pending


def _peer(socket: pynng.Socket, pipe_id: int) -> str:
    try:
        pipe = next((p for p in socket.pipes if p.id == pipe_id), None)
        return "?" if pipe is None else str(pipe.remote_address)
    except (AttributeError, pynng.NNGException):
        return "?"
