"""Serving one REP socket through NNG contexts.

Every request is received, handled and answered on its own context, so a reply can only
ever go to the caller that asked, and a handler that holds its reply (a long-poll wait)
blocks nobody else. Receivers are elastic: there are always a few idle contexts waiting,
more are opened as requests arrive, and surplus ones close once they have answered.

Whatever arrives, the caller gets a reply: bytes that do not decode, ops this socket
does not serve and handler bugs all become ``Error`` messages with stable codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import Awaitable, Callable

import pynng
import structlog

from fastworker_control_plane.core.rejected import Rejected
from fastworker_protocol import (
    Codec,
    DecodeError,
    EncodeError,
    Error,
    ErrorCode,
    Message,
    message_op,
)

log = structlog.get_logger(__name__)

Handler = Callable[[Message, int], Awaitable[Message]]
"""Handles one decoded request; the int is the id of the NNG pipe it came from."""

_MIN_IDLE = 4
_MAX_IDLE = 16


class ReplyServer:
    def __init__(
        self,
        name: str,
        socket: pynng.Socket,
        codec: Codec,
        handler: Handler,
        serves: tuple[type[Message], ...],
        auth: str | None = None,
    ) -> None:
        self.name = name
        self._socket = socket
        self._codec = codec
        self._handler = handler
        self._serves = serves
        self._auth = None if auth is None else auth.encode()
        self._idle = 0
        self._receivers: set[asyncio.Task[None]] = set()
        self._contexts: set[pynng.Context] = set()
        self._answering: set[asyncio.Task[None]] = set()
        self._closing = False

    def start(self) -> None:
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
            with contextlib.suppress(pynng.NNGException):
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
        receiver.add_done_callback(self._receivers.discard)

    async def _receive_loop(self) -> None:
        context = self._socket.new_context()
        self._contexts.add(context)
        me = asyncio.current_task()
        assert me is not None
        try:
            while not self._closing:
                self._idle += 1
                try:
                    request = await context.arecv_msg()
                finally:
                    self._idle -= 1
                self._answering.add(me)
                if self._idle < _MIN_IDLE:
                    self._spawn()
                reply = await self.reply_to(request.bytes, _pipe_id(request))
                # Let go of both before waiting for the next request: an idle context
                # kept its last ones alive (16 MB requests held 150 MB between them).
                del request
                await context.asend(reply)
                del reply
                self._answering.discard(me)
                if self._idle >= _MAX_IDLE:
                    return
        except pynng.NNGException:
            return
        finally:
            self._answering.discard(me)
            self._contexts.discard(context)
            with contextlib.suppress(pynng.NNGException):
                context.close()

    async def reply_to(self, data: bytes, pipe_id: int) -> bytes:
        """The encoded reply to one request's bytes. Never raises (but for cancellation)."""
        try:
            message = self._codec.decode(data)
        except DecodeError as exc:
            log.warning("bad request", server=self.name, code=exc.code, error=str(exc))
            return self._error(exc.code, str(exc))
        if self._auth is not None and not hmac.compare_digest(
            (message.auth or "").encode(), self._auth
        ):
            # Nothing else is said to a peer without the token: not even what ops exist.
            return self._error(ErrorCode.UNAUTHORIZED, "missing or wrong auth token")
        if not isinstance(message, self._serves):
            served = ", ".join(message_op(m) for m in self._serves)
            return self._error(
                ErrorCode.WRONG_PORT,
                f"{message_op(message)!r} is not served here ({self.name} serves: {served})",
            )
        try:
            reply = await self._handler(message, pipe_id)
            return self._codec.encode(reply)
        except EncodeError as exc:
            return self._error(
                ErrorCode.OVERSIZE, f"the reply does not fit in a message ({exc}): ask for less"
            )
        except Rejected as exc:
            return self._codec.encode(Error(code=exc.code, message=exc.message, detail=exc.detail))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("handler failed", server=self.name, op=message_op(message))
            return self._error(ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")

    def _error(self, code: ErrorCode, message: str) -> bytes:
        return self._codec.encode(Error(code=code, message=message))


def _pipe_id(message: pynng.Message) -> int:
    try:
        return int(message.pipe.id)
    except (AttributeError, KeyError, pynng.NNGException):
        return -1
