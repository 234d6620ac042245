"""Sending and receiving on NNG contexts from asyncio with fewer thread hops than pynng's
``arecv``/``asend``.

pynng's async calls allocate an NNG aio, a future and a shielded coroutine per operation,
and every completion, sends included, comes back to the event loop from an NNG thread
through ``call_soon_threadsafe``. Here each context keeps its two aios for its lifetime:

* **Receiving**, for a server (REP): ``try_receive`` takes a request that has already
  arrived, without waiting, and the event loop watches the socket's receive descriptor
  (``NNG_OPT_RECVFD``, which NNG raises while a request waits for a context) to know when
  to ask. No NNG thread runs Python for it: a burst of requests is one wake-up of the
  loop, which takes them all.
* **Receiving**, for a client (REQ, whose replies come on contexts the descriptor does
  not cover): ``receive`` completes on an NNG thread, which puts the completion in an
  ``Inbox``; the inbox wakes the event loop once for all the completions that arrive
  before the loop gets to them (one wakeup per batch, not per message).
* **Sending** uses an aio without a callback. NNG queues a message on a connection that
  is free at once, inside ``nng_ctx_send``, so most sends are done when the call returns
  and cost no hop at all. A send queued behind another message on its connection (a peer
  reading slowly, or replies sent back to back) stays pending; pending sends are polled
  every ``POLL`` seconds, per connection oldest first (NNG sends a connection's messages
  in order), until done. Polling only decides when the context may be used again: the
  message itself goes out as soon as NNG can write it.

It leans on two pynng internals that every pynng release up to 0.9 has had: the C
callback ``lib._async_complete`` and the id-to-callable map it looks ids up in
(``pynng._aio._aio_map``). It must never block the event loop: no call here waits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import Any

import pynng
from pynng import _aio
from pynng._nng import ffi, lib
from pynng.exceptions import check_err

from fastworker_common import nng_exit  # noqa: F401  (a clean exit with NNG objects left)

POLL = 0.0005  # seconds between looks at sends NNG has not yet taken


class Inbox:
    """Completions from NNG threads, run on the event loop: one wakeup per batch."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: deque[Callable[[], None]] = deque()
        self._woken = False

    def put(self, item: Callable[[], None]) -> None:
        """Any thread. Runs ``item`` on the loop soon (not at all once the loop closed)."""
        self._items.append(item)
        if not self._woken:
            self._woken = True
            with contextlib.suppress(RuntimeError):  # the loop has closed
                self._loop.call_soon_threadsafe(self._run)

    def _run(self) -> None:
        # Cleared before draining: an item put after the drain's last look finds it clear
        # and wakes the loop again; one put before that is drained here.
        self._woken = False
        items = self._items
        while items:
            items.popleft()()


class ContextIO:
    """One NNG context's receives and sends, one of each at a time at most."""

    def __init__(self, context: pynng.Context, inbox: Inbox, sends: PendingSends) -> None:
        self.context = context
        self._ctx = context.context
        self._inbox = inbox
        self._sends = sends
        self._key = id(self)  # what NNG hands the C callback, which finds the callable by it
        aio_p = ffi.new("nng_aio **")
        check_err(lib.nng_aio_alloc(aio_p, lib._async_complete, ffi.cast("void *", self._key)))
        self._recv_aio: Any = aio_p[0]
        check_err(lib.nng_aio_alloc(aio_p, ffi.NULL, ffi.NULL))
        self._send_aio: Any = aio_p[0]
        self._msg_p = ffi.new("nng_msg **")  # where try_receive's message is put
        self._receiving: asyncio.Future[tuple[bytes, int]] | None = None
        self._sending: asyncio.Future[None] | None = None
        self._closed = False

    @property
    def sending(self) -> bool:
        """A send is pending: the context must not be used until it is done."""
        return self._sending is not None

    def receive(self) -> asyncio.Future[tuple[bytes, int]]:
        """The next request's bytes and the id of the connection (NNG pipe) it came on."""
        assert self._receiving is None, "one receive at a time"
        future: asyncio.Future[tuple[bytes, int]] = self._inbox._loop.create_future()
        if self._closed:
            future.set_exception(_closed())
            return future
        self._receiving = future
        _aio._aio_map[self._key] = self._received_on_nng_thread
        lib.nng_ctx_recv(self._ctx, self._recv_aio)
        return future

    def try_receive(self) -> tuple[bytes, int] | None:
        """A request that has arrived, with the id of its connection; ``None`` if none is
        waiting. Never blocks. Raises what NNG reports (``Closed`` once closed)."""
        assert self._receiving is None, "try_receive while a receive is pending"
        if self._closed:
            raise _closed()
        error = lib.nng_ctx_recvmsg(self._ctx, self._msg_p, lib.NNG_FLAG_NONBLOCK)
        if error == lib.NNG_EAGAIN:
            return None
        check_err(error)
        return _taken(self._msg_p[0])

    def _received_on_nng_thread(self) -> None:
        self._inbox.put(self._received)

    def _received(self) -> None:
        future, self._receiving = self._receiving, None
        if future is None or self._closed:
            if future is not None and not future.done():
                future.set_exception(_closed())
            return
        error = lib.nng_aio_result(self._recv_aio)
        if error:
            if not future.done():
                future.set_exception(_error(error))
            return
        received = _taken(lib.nng_aio_get_msg(self._recv_aio))
        if not future.done():  # a cancelled receive drops what came meanwhile
            future.set_result(received)

    def cancel_receive(self) -> None:
        if self._receiving is not None and not self._closed:
            lib.nng_aio_cancel(self._recv_aio)

    def send(self, data: bytes, pipe_id: int) -> asyncio.Future[None] | None:
        """Queue ``data``; ``None`` if NNG took it at once, else a future done once it has
        (the context must not send or receive again before). Raises what NNG reports."""
        assert not self.sending, "one send at a time"
        if self._closed:
            raise _closed()
        msg_p = self._msg_p  # free between calls: try_receive's, and never a receive's
        check_err(lib.nng_msg_alloc(msg_p, 0))
        msg = msg_p[0]
        error = lib.nng_msg_append(msg, data, len(data))
        if error:
            lib.nng_msg_free(msg)
            check_err(error)
        lib.nng_aio_set_msg(self._send_aio, msg)
        lib.nng_ctx_send(self._ctx, self._send_aio)
        if lib.nng_aio_busy(self._send_aio):
            self._sending = self._sends.add(self, pipe_id)
            return self._sending
        self._check_sent()
        return None

    def finish_send(self) -> bool:
        """If the pending send has ended, settle its future and return true."""
        future = self._sending
        if future is None or future.done():
            self._sending = None
            return True
        if lib.nng_aio_busy(self._send_aio):
            return False
        self._sending = None
        try:
            self._check_sent()
        except pynng.NNGException as exc:
            future.set_exception(exc)
        else:
            future.set_result(None)
        return True

    def _check_sent(self) -> None:
        """After a send ended: raise its error, freeing the message NNG gave back."""
        error = lib.nng_aio_result(self._send_aio)
        if error:
            msg = lib.nng_aio_get_msg(self._send_aio)
            if msg != ffi.NULL:
                lib.nng_aio_set_msg(self._send_aio, ffi.NULL)
                lib.nng_msg_free(msg)
            raise _error(error)

    def close(self) -> None:
        """Close the context; pending operations end (a receive with ``Closed``)."""
        if self._closed:
            return
        with contextlib.suppress(pynng.NNGException):
            self.context.close()
        # Stopping waits for a callback running on an NNG thread; cffi lets go of the GIL
        # meanwhile, so that callback can run.
        lib.nng_aio_stop(self._recv_aio)
        lib.nng_aio_stop(self._send_aio)
        self._closed = True
        _aio._aio_map.pop(self._key, None)
        with contextlib.suppress(pynng.NNGException):
            self._check_sent()
        sending, self._sending = self._sending, None
        if sending is not None and not sending.done():
            sending.set_exception(_closed())
            sending.exception()  # retrieved: a client's pending send has no one waiting
        lib.nng_aio_free(self._recv_aio)
        lib.nng_aio_free(self._send_aio)
        future, self._receiving = self._receiving, None
        if future is not None and not future.done():
            future.set_exception(_closed())


class BlockingContext:
    """One REQ context's request and reply, on the calling thread: waited for in C with
    the GIL released, through one aio kept for the context's life, where pynng's blocking
    calls allocate two aios and a message object per request.

    ``abort`` may be called from any thread (a wait in progress ends with ``Closed``);
    ``free`` only once no thread is inside ``exchange``."""

    def __init__(self, socket: pynng.Socket) -> None:
        ctx_p = ffi.new("nng_ctx *")
        check_err(lib.nng_ctx_open(ctx_p, socket.socket))
        self._ctx = ctx_p[0]
        aio_p = ffi.new("nng_aio **")
        check_err(lib.nng_aio_alloc(aio_p, ffi.NULL, ffi.NULL))
        self._aio: Any = aio_p[0]
        self._msg_p = ffi.new("nng_msg **")
        self._aborted = False
        self._freed = False

    def exchange(self, data: bytes, send_for: float, reply_within: Callable[[], float]) -> bytes:
        """Send ``data`` (waiting at most ``send_for`` seconds for a connection to take
        it), then wait for the reply at most ``reply_within()`` seconds (asked once the
        request is sent). Raises what NNG reports (``Timeout``, ``Closed``, ...)."""
        aio, msg_p = self._aio, self._msg_p
        check_err(lib.nng_msg_alloc(msg_p, 0))
        error = lib.nng_msg_append(msg_p[0], data, len(data))
        if error:
            lib.nng_msg_free(msg_p[0])
            check_err(error)
        lib.nng_aio_set_msg(aio, msg_p[0])
        lib.nng_aio_set_timeout(aio, _ms(send_for))
        lib.nng_ctx_send(self._ctx, aio)
        lib.nng_aio_wait(aio)
        error = lib.nng_aio_result(aio)
        if error:  # the message was not taken: it is still ours to free
            unsent = lib.nng_aio_get_msg(aio)
            if unsent != ffi.NULL:
                lib.nng_aio_set_msg(aio, ffi.NULL)
                lib.nng_msg_free(unsent)
            raise _error(error)
        lib.nng_aio_set_timeout(aio, _ms(reply_within()))
        lib.nng_ctx_recv(self._ctx, aio)
        lib.nng_aio_wait(aio)
        error = lib.nng_aio_result(aio)
        if error:
            raise _error(error)
        data, _ = _taken(lib.nng_aio_get_msg(aio))
        return data

    def abort(self) -> None:
        """Close the context: a wait in progress, on any thread, ends with ``Closed``."""
        if not self._aborted:
            self._aborted = True
            lib.nng_ctx_close(self._ctx)

    def free(self) -> None:
        """Close and let go of the context (no thread may be inside ``exchange``)."""
        self.abort()
        if not self._freed:
            self._freed = True
            lib.nng_aio_free(self._aio)


def _ms(seconds: float) -> int:
    """A wait for NNG, in whole milliseconds: at least 1 (0 would mean "do not wait")."""
    return max(1, int(seconds * 1000))


class PendingSends:
    """Sends NNG has not taken yet, per connection in the order they were made, polled."""

    def __init__(self, loop: asyncio.AbstractEventLoop, poll: float = POLL) -> None:
        self._loop = loop
        self._poll = poll
        self._by_pipe: dict[int, deque[ContextIO]] = {}
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return sum(len(q) for q in self._by_pipe.values())

    def add(self, io: ContextIO, pipe_id: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = self._loop.create_future()
        self._by_pipe.setdefault(pipe_id, deque()).append(io)
        if self._timer is None:
            self._timer = self._loop.call_later(self._poll, self._check)
        return future

    def _check(self) -> None:
        self._timer = None
        for pipe_id, queue in list(self._by_pipe.items()):
            while queue and queue[0].finish_send():
                queue.popleft()
            if not queue:
                del self._by_pipe[pipe_id]
        if self._by_pipe:
            self._timer = self._loop.call_later(self._poll, self._check)


def _taken(msg: Any) -> tuple[bytes, int]:
    """A received message's body and the id of its connection; the message is freed."""
    try:
        data = bytes(ffi.buffer(lib.nng_msg_body(msg), lib.nng_msg_len(msg)))
        return data, int(lib.nng_pipe_id(lib.nng_msg_get_pipe(msg)))
    finally:
        lib.nng_msg_free(msg)


def close_pipe(pipe_id: int) -> None:
    """Close one connection (NNG pipe) by its id; one already closed is left alone."""
    pipe = ffi.new("nng_pipe *")
    pipe.id = pipe_id
    lib.nng_pipe_close(pipe[0])


def _error(code: int) -> pynng.NNGException:
    try:
        check_err(code)
    except pynng.NNGException as exc:
        return exc
    return pynng.NNGException("unknown error", code)


def _closed() -> pynng.NNGException:
    return _error(lib.NNG_ECLOSED)
