"""In-process backends: where clients send their requests when a test says so.

:mod:`fastworker.testing` installs one (``eager()``, or a ``Cluster``). While one is
installed, every :class:`~fastworker.Client` and :class:`~fastworker.SyncClient` started in
this process talks to it instead of finding a control plane on the network, so code under
test needs no address and no change. The bytes are the real ones: a request is encoded
with the client's codec (size limits included) and the reply decoded and turned into the
SDK's errors exactly as a reply from the network would be.

A backend answers a request's bytes for one *lane*: a submission priority (on the network,
the port a ``submit`` arrives on is its priority) or ``None``, the results port.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Protocol, TypeVar

from fastworker_common.errors import Timeout
from fastworker_common.transport import read_reply, with_auth
from fastworker_protocol import Codec, Message, Priority

M = TypeVar("M", bound=Message)

Lane = Priority | None


class Backend(Protocol):
    """Answers clients in this process; ``name`` says what it is in error messages."""

    name: str

    def clock(self) -> float:
        """Its time now, in Unix seconds (a countdown counts from it)."""
        ...

    async def answer(self, lane: Lane, data: bytes) -> bytes:
        """The reply to ``data``, on the caller's event loop."""
        ...

    def answer_blocking(self, lane: Lane, data: bytes, timeout: float) -> bytes:
        """The reply to ``data``, on the calling thread, within ``timeout`` seconds (else
        ``TimeoutError``)."""
        ...


_installed: list[Backend] = []
_lock = threading.Lock()


def install(backend: Backend) -> None:
    """Clients started from now on talk to ``backend`` (until ``uninstall``)."""
    with _lock:
        _installed.append(backend)


def uninstall(backend: Backend) -> None:
    with _lock:
        if backend in _installed:
            _installed.remove(backend)


def installed() -> Backend | None:
    """The backend installed last and still installed, if any."""
    with _lock:
        return _installed[-1] if _installed else None


def now() -> float:
    """The time a countdown counts from: the installed backend's clock (a test cluster's
    moves when the test says), else this machine's."""
    backend = installed()
    return time.time() if backend is None else backend.clock()


class _Channel:
    connected = True

    def __init__(self, backend: Backend, lane: Lane, codec: Codec, auth: str | None) -> None:
        self.address = backend.name
        self._backend = backend
        self._lane = lane
        self._codec = codec
        self._auth = auth

    def close(self) -> None:
        """Nothing to close: the backend outlives its clients."""


class LocalChannel(_Channel):
    """What :class:`~fastworker.Client` uses in place of a ``RequestChannel``."""

    async def request(
        self,
        message: Message,
        reply_type: type[M],
        timeout: float,
        connect_timeout: float | None = None,
    ) -> M:
        data = self._codec.encode(with_auth(message, self._auth))
        try:
            reply = await asyncio.wait_for(self._backend.answer(self._lane, data), timeout)
        except TimeoutError:
            raise Timeout(f"no reply from {self.address} within {timeout:g} s") from None
        return read_reply(self._codec, self.address, reply, reply_type)


class LocalBlockingChannel(_Channel):
    """What :class:`~fastworker.SyncClient` uses in place of a ``BlockingChannel``."""

    def request(
        self,
        message: Message,
        reply_type: type[M],
        timeout: float,
        connect_timeout: float | None = None,
    ) -> M:
        data = self._codec.encode(with_auth(message, self._auth))
        try:
            reply = self._backend.answer_blocking(self._lane, data, timeout)
        except TimeoutError:
            raise Timeout(f"no reply from {self.address} within {timeout:g} s") from None
        return read_reply(self._codec, self.address, reply, reply_type)
