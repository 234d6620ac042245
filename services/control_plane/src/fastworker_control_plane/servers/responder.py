"""From a request's bytes to its reply's bytes: authenticate, decode, check the op is
served here, handle, encode. No sockets: the reply servers put it behind NNG, and the
in-process test cluster (``fastworker_control_plane.testing``) calls it directly.

Whatever arrives, the caller gets a reply: bytes that do not decode, ops not served here
and handler bugs all become ``Error`` messages with stable codes. With an auth token, a
request without it gets ``unauthorized`` before anything else about it is looked at.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from fastworker_common.tokens import Tokens
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
"""Handles one decoded request; the int is the id of the connection (NNG pipe) it came
from."""

_UNAUTHORIZED = "missing or wrong auth token"


class Responder:
    def __init__(
        self,
        name: str,
        codec: Codec,
        handler: Handler,
        serves: tuple[type[Message], ...],
        auth: str | Tokens | None = None,
        fence: Callable[[], str | None] | None = None,
    ) -> None:
        """``fence`` says why this process must not answer now (a replica that is no
        longer the leader), checked before handling and again before replying."""
        self.name = name
        self._fence = fence
        self._codec = codec
        self._handler = handler
        self._serves = serves
        self._auth = Tokens.of(auth)
        self._unauthorized = codec.encode(Error(code=ErrorCode.UNAUTHORIZED, message=_UNAUTHORIZED))

    async def reply_to(self, data: bytes, pipe_id: int) -> bytes:
        """The encoded reply to one request's bytes. Never raises (but for cancellation)."""
        if self._auth is not None and not self._authorized(data):
            # Nothing else is said to a peer without the token: not whether its bytes
            # decode, nor what ops exist, nor which this socket serves.
            return self._unauthorized
        try:
            message = self._codec.decode(data)
        except DecodeError as exc:
            log.warning("bad request", server=self.name, code=exc.code, error=str(exc))
            return self._error(exc.code, str(exc))
        if not isinstance(message, self._serves):
            served = ", ".join(message_op(m) for m in self._serves)
            return self._error(
                ErrorCode.WRONG_PORT,
                f"{message_op(message)!r} is not served here ({self.name} serves: {served})",
            )
        if (fenced := self._fenced()) is not None:
            return fenced
        try:
            reply = await self._handler(message, pipe_id)
            if (fenced := self._fenced()) is not None:
                return fenced
            return self._codec.encode(reply)
        except EncodeError as exc:
            return self._error(
                ErrorCode.OVERSIZE, f"the reply does not fit in a message ({exc}): ask for less"
            )
        except Rejected as exc:
            if (fenced := self._fenced()) is not None:
                return fenced
            return self._codec.encode(Error(code=exc.code, message=exc.message, detail=exc.detail))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("handler failed", server=self.name, op=message_op(message))
            return self._error(ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")

    def _fenced(self) -> bytes | None:
        why = None if self._fence is None else self._fence()
        return None if why is None else self._error(ErrorCode.UNAVAILABLE, why)

    def _authorized(self, data: bytes) -> bool:
        assert self._auth is not None
        return self._auth.accepts(self._codec.auth_of(data))  # before anything else is read

    def _error(self, code: ErrorCode, message: str) -> bytes:
        return self._codec.encode(Error(code=code, message=message))
