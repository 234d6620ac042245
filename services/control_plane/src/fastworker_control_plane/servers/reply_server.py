"""Serving one REP socket through NNG contexts.

Every request is received, handled and answered on its own context, so a reply can only
ever go to the caller that asked, and a handler that holds its reply (a long-poll wait)
blocks nobody else. The event loop watches the socket's receive descriptor; when requests
have arrived it takes them all at once, each on an idle context (more are opened as
needed, and surplus ones close once they have answered). A request is handled at once, in
that same turn of the loop: most are answered there and then (a submit, a status, a fetch
with work ready), and only one that waits becomes a task (``eager_start``). Contexts do
their I/O through ``nng_io``: no NNG thread runs Python to receive, and a reply NNG takes
at once costs no trip back from an NNG thread either.

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
from functools import partial

import pynng
import structlog

from fastworker_common.nng_io import ContextIO, Inbox, PendingSends, close_pipe
from fastworker_common.tokens import Tokens
from fastworker_control_plane.reclaim import BULK
from fastworker_control_plane.servers.connections import Connections
from fastworker_control_plane.servers.eager_start import start_eagerly
from fastworker_control_plane.servers.responder import Handler, Responder
from fastworker_protocol import (
    Codec,
    Message,
)

log = structlog.get_logger(__name__)

_MAX_IDLE = 16  # contexts kept for the next requests; more close once they have answered
_BATCH = 256  # requests taken per turn of the event loop at most, so timers still run
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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading: int | None = None  # the receive descriptor the loop watches
        self._idle: list[ContextIO] = []
        self._contexts: set[ContextIO] = set()
        self._inbox: Inbox | None = None
        self._sends: PendingSends | None = None
        self._answering: set[asyncio.Task[bytes]] = set()
        self._closing = False
        # Told when serving fails with an error no server expects (the control plane's
        # supervisor): a bug, or NNG refusing to receive.
        self.on_fault: Callable[[BaseException], None] | None = None
        # Told when a closed connection dropped many held requests at once (``reclaim``).
        self.on_bulk_release: Callable[[], None] | None = None

    @property
    def idle(self) -> int:
        """Contexts waiting for a request."""
        return len(self._idle)

    @property
    def contexts(self) -> int:
        """Contexts open: idle ones, and those answering a request."""
        return len(self._contexts)

    def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._inbox, self._sends = Inbox(loop), PendingSends(loop)

        def removed(pipe: pynng.Pipe) -> None:  # on an NNG thread
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(self._pipe_closed, pipe.id)

        # Added to, not replacing, what the socket's owner listens to (app.py's registration).
        self._socket.add_post_pipe_remove_cb(removed)
        self._reading = self._socket.recv_fd
        loop.add_reader(self._reading, self._take_requests)

    async def close(self, grace: float = 2.0) -> None:
        """Stop taking requests, let those being answered finish (up to ``grace``
        seconds; the rest are cancelled), then close.

        Contexts are closed rather than their operations cancelled: closing aborts NNG
        operations deterministically, where cancelling them is not reliable in pynng.
        """
        self._closing = True
        self._stop_reading()
        if self._answering:
            await asyncio.wait(list(self._answering), timeout=grace)
        held = list(self._answering)
        for answering in held:
            answering.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        for context in list(self._contexts):
            self._discard(context)
        self._socket.close()

    def _stop_reading(self) -> None:
        if self._reading is not None and self._loop is not None:
            self._loop.remove_reader(self._reading)
        self._reading = None

    # --- requests in ----------------------------------------------------------------------

    def _take_requests(self) -> None:
        """The socket has requests waiting: take them (up to ``_BATCH``), each on a
        context of its own, and handle each at once."""
        for _ in range(_BATCH):
            if self._closing:
                return
            context = self._idle.pop() if self._idle else self._open()
            try:
                received = context.try_receive()
            except pynng.NNGException as error:  # NNG cannot receive: deaf from now on
                self._discard(context)
                self._stop_reading()
                self._fault(error)
                return
            if received is None:  # taken them all
                self._park(context)
                return
            try:
                self._handle(context, *received)
            except Exception as error:  # a bug: this request goes unanswered, not the next
                self._discard(context)
                self._fault(error)

    def _handle(self, context: ContextIO, data: bytes, pipe_id: int) -> None:
        """Answer now if the reply is ready at once; else in a task, which is cancelled
        if the request's connection closes meanwhile (nobody left to answer)."""
        assert self._loop is not None
        if pipe_id >= 0 and self.connections.is_gone(pipe_id):
            self._park(context)
            return
        answered, reply = start_eagerly(self._responder.reply_to(data, pipe_id), self._loop)
        if answered:
            assert isinstance(reply, bytes)
            self._reply(context, reply, pipe_id)
            return
        assert isinstance(reply, asyncio.Task)
        self._answering.add(reply)
        if pipe_id >= 0:
            self.connections.handling(pipe_id, reply)
        reply.add_done_callback(partial(self._answered, context, pipe_id))

    def _answered(self, context: ContextIO, pipe_id: int, answering: asyncio.Task[bytes]) -> None:
        self._answering.discard(answering)
        if pipe_id >= 0:
            self.connections.handled(pipe_id, answering)
        if answering.cancelled():  # its connection closed, or the server is closing
            self._park(context)
            return
        try:
            self._reply(context, answering.result(), pipe_id)  # reply_to never raises
        except Exception as error:
            self._discard(context)
            self._fault(error)

    # --- replies out ----------------------------------------------------------------------

    def _reply(self, context: ContextIO, reply: bytes, pipe_id: int) -> None:
        """Queue ``reply`` for its connection, unless that makes the connection's unread
        replies too many: then the connection is closed instead. The context is free
        again once NNG has taken the reply."""
        size = len(reply)
        if pipe_id >= 0:
            if self.connections.is_gone(pipe_id):
                self._park(context)
                return
            if not self.connections.fits(pipe_id, size):
                self._cut(pipe_id)
                self._park(context)
                return
            self.connections.queued(pipe_id, size)
        try:
            pending = context.send(reply, pipe_id)
        except pynng.NNGException:  # the context is closed, or NNG refused: drop it
            self._sent(context, pipe_id, size, ok=False)
            return
        if pending is None:
            self._sent(context, pipe_id, size, ok=True)
        else:
            pending.add_done_callback(
                lambda done: self._sent(context, pipe_id, size, ok=_succeeded(done))
            )

    def _sent(self, context: ContextIO, pipe_id: int, size: int, *, ok: bool) -> None:
        if pipe_id >= 0:
            self.connections.sent(pipe_id, size)
        if ok:
            self._park(context)
        else:
            self._discard(context)

    # --- contexts and connections ---------------------------------------------------------

    def _open(self) -> ContextIO:
        assert self._inbox is not None
        assert self._sends is not None
        context = ContextIO(self._socket.new_context(), self._inbox, self._sends)
        self._contexts.add(context)
        return context

    def _park(self, context: ContextIO) -> None:
        """A context that has answered waits for the next request, or closes if enough
        others already wait."""
        if self._closing or len(self._idle) >= _MAX_IDLE:
            self._discard(context)
        else:
            self._idle.append(context)

    def _discard(self, context: ContextIO) -> None:
        self._contexts.discard(context)
        with contextlib.suppress(ValueError):
            self._idle.remove(context)
        context.close()

    def _fault(self, error: BaseException) -> None:
        if self.on_fault is not None:
            self.on_fault(error)
        else:
            log.error("serving failed", server=self.name, exc_info=error)

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


def _succeeded(future: asyncio.Future[None]) -> bool:
    return not future.cancelled() and future.exception() is None


def _peer(socket: pynng.Socket, pipe_id: int) -> str:
    try:
        pipe = next((p for p in socket.pipes if p.id == pipe_id), None)
        return "?" if pipe is None else str(pipe.remote_address)
    except (AttributeError, pynng.NNGException):
        return "?"
