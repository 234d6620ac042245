"""Requests to one REP address from the calling thread, straight to NNG, with no event loop
in between: the blocking client's channel, and the subworker's quick lane's.

A request takes an idle NNG context from the channel's pool (or opens one), sends and
waits for the reply in C with the GIL released (``nng_io.BlockingContext``: no
allocation per request but the message), bounded by what is left of the call's deadline,
and gives the context back. Many threads may share one
channel: each request has its own context, so replies never cross. As in the async
channel, NNG never resends: retrying is the caller's decision.
"""

from __future__ import annotations

import threading
import time
from typing import TypeVar

import pynng

from fastworker_common.errors import ControlPlaneUnavailable, Timeout, nobody_at
from fastworker_common.nng_io import BlockingContext
from fastworker_common.sightings import Peer
from fastworker_common.tls import TLS
from fastworker_common.transport import dial_req, read_reply, with_auth
from fastworker_protocol import Codec, Message

M = TypeVar("M", bound=Message)

MAX_IDLE_CONTEXTS = 64  # kept open for reuse; more threads than this open and close theirs
_CLOSE_GRACE = 2.0  # seconds close() waits for aborted requests to let go of the socket


class BlockingChannel:
    """Sends requests to one REP address from the calling thread; thread-safe."""

    def __init__(
        self,
        address: str,
        codec: Codec,
        auth: str | None = None,
        tls: TLS | None = None,
        *,
        unreachable: str | None = None,
        peer: Peer | None = None,
    ) -> None:
        """``unreachable`` is the message for a control plane never connected (default:
        nobody answered at ``address``); ``peer``, the control plane whose replies are
        recorded, to tell one that stopped answering (default: ``address``, on its own)."""
        self.address = address
        self._unreachable = unreachable or nobody_at(address)
        self._peer = peer or Peer(address)
        self._codec = codec
        self._auth = auth
        self._socket = dial_req(address, codec, tls)
        self._idle: list[BlockingContext] = []
        self._busy: set[BlockingContext] = set()
        self._lock = threading.Lock()
        self._released = threading.Condition(self._lock)
        self._closed = False

    @property
    def connected(self) -> bool:
        return bool(self._socket.pipes)

    def request(
        self,
        message: Message,
        reply_type: type[M],
        timeout: float,
        connect_timeout: float | None = None,
    ) -> M:
        """Send ``message`` and return its reply, raising the SDK's errors, as
        :meth:`RequestChannel.request <fastworker_common.transport.RequestChannel.request>` does:
        ``Timeout`` if connected but not answered within ``timeout``, else
        ``ControlPlaneUnavailable`` (after ``connect_timeout`` already, if no connection is
        made by then); ``EncodeError`` before anything is sent if it cannot be sent."""
        data = self._codec.encode(with_auth(message, self._auth))
        deadline = time.monotonic() + timeout
        # A REQ send waits for a connection to take it: that wait is the connect budget.
        send_for = timeout
        if connect_timeout is not None and not self.connected:
            send_for = min(timeout, connect_timeout)
        context = self._take()
        done = False
        try:
            reply = context.exchange(data, send_for, lambda: deadline - time.monotonic())
            done = True
        except pynng.Timeout:
            if not self.connected:  # never reached, or it stopped answering
                lost = self._peer.unreachable(self._unreachable, time.monotonic())
                raise ControlPlaneUnavailable(lost) from None
            raise Timeout(f"no reply from {self.address} within {timeout:g} s") from None
        except pynng.Closed:
            raise ControlPlaneUnavailable(f"the connection to {self.address} was closed") from None
        except pynng.NNGException as exc:
            raise ControlPlaneUnavailable(f"connection to {self.address} failed: {exc}") from exc
        finally:
            self._give_back(context, reusable=done)
        self._peer.answered(time.monotonic())
        return read_reply(self._codec, self.address, reply, reply_type)

    def _take(self) -> BlockingContext:
        with self._lock:
            if self._closed:
                raise ControlPlaneUnavailable(f"the connection to {self.address} was closed")
            context = self._idle.pop() if self._idle else BlockingContext(self._socket)
            self._busy.add(context)
            return context

    def _give_back(self, context: BlockingContext, *, reusable: bool) -> None:
        """Keep ``context`` for the next request, or close it: after a failed exchange (its
        state is not worth trusting), past ``MAX_IDLE_CONTEXTS``, or once closed."""
        with self._lock:
            self._busy.discard(context)
            self._released.notify_all()
            if reusable and not self._closed and len(self._idle) < MAX_IDLE_CONTEXTS:
                self._idle.append(context)
                return
        context.free()

    def close(self) -> None:
        """Close the socket; requests waiting on it end with ``ControlPlaneUnavailable``.

        Their contexts are closed first, which wakes them, and the socket only once they
        have let go of it (or after ``_CLOSE_GRACE``): closing a socket while another
        thread is still inside a call on it can deadlock in pynng."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            idle, self._idle = self._idle, []
            busy = list(self._busy)
        for context in idle:
            context.free()
        for context in busy:  # their threads free them once woken
            context.abort()
        with self._released:
            self._released.wait_for(lambda: not self._busy, _CLOSE_GRACE)
        self._socket.close()
