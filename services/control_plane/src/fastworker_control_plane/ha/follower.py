"""A follower's link to its leader: receive the journal into the state dir.

It dials the leader's replication socket (REQ) and sends where it is (an ``Ack``, or a
``Refused`` for a deposed leader); each answer is checked by the ``Follower`` state
machine, carried out on disk by the ``Replica`` (fdatasynced, in a thread) and
acknowledged by the next request. A leader holds a request while nothing is new and
sends a heartbeat every ``HEARTBEAT``; silence for ``silence`` seconds, or a new
leader, redials. The replica holds the state dir's lock until ``close``. A leader that
refuses this replica's token would refuse every retry: ``run`` raises ``Unauthorized``.

``lost`` is set when the connection to the leader followed drops (and cleared when one
is made again, or another leader is followed): the first hint that a leader is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pynng
import structlog

from fastworker_common.errors import Unauthorized
from fastworker_common.tls import TLS, dial_config
from fastworker_control_plane.replication import messages as m
from fastworker_control_plane.replication.follower import Follower, Phase
from fastworker_control_plane.replication.replica import Replica
from fastworker_control_plane.replication.source import CHUNK

log = structlog.get_logger(__name__)

SILENCE = 3.0  # seconds without an answer before the link is redialed


class FollowerLink:
    def __init__(
        self,
        state_dir: Path,
        name: str,
        *,
        max_message_size: int,
        tls: TLS | None = None,
        auth_token: str | None = None,
        silence: float = SILENCE,
    ) -> None:
        self.name = name
        self._auth = auth_token or ""
        self._replica = Replica(state_dir)
        self.follower: Follower = self._replica.open()
        self._max = max_message_size
        self._tls = tls
        self._silence = silence
        self._leader: str | None = None
        self._changed = asyncio.Event()
        self.heard_at: float | None = None  # monotonic time of the last answer
        self.lost = asyncio.Event()  # the connection to the leader followed dropped
        self.found = asyncio.Event()  # not lost: connected, or following another leader
        self._connected = asyncio.Event()  # a connection to the leader followed is up
        self._pipes: set[int] = set()

    @property
    def phase(self) -> Phase:
        return self.follower.phase

    def follow(self, address: str | None) -> None:
        """Receive from the replication socket at ``address`` (None: no leader known)."""
        if address != self._leader:
            self._leader = address
            self._set_lost(False)
            self._connected.clear()
            self._changed.set()

    async def run(self) -> None:
        """Follow whichever leader ``follow`` names, until cancelled (or refused:
        ``Unauthorized``)."""
        while True:
            self._changed.clear()
            address = self._leader
            if address is None:
                await self._changed.wait()
                continue
            await self._session(address)

    async def _session(self, address: str) -> None:
        socket = pynng.Req0(
            # A piece of a snapshot, or one frame bigger than a piece.
            recv_max_size=2 * (CHUNK + self._max),
            async_backend="asyncio",
            tls_config=dial_config(address, self._tls),
        )
        socket.resend_time = -1
        socket.reconnect_time_min = 50
        socket.reconnect_time_max = 1000
        loop = asyncio.get_running_loop()
        socket.add_post_pipe_connect_cb(
            lambda pipe: _call_soon(loop, self._pipe_up, address, pipe.id)
        )
        socket.add_post_pipe_remove_cb(
            lambda pipe: _call_soon(loop, self._pipe_down, address, pipe.id)
        )
        socket.dial(address, block=False)
        log.info("replication: following", leader=address)
        diagnosis = asyncio.ensure_future(self._diagnose(address))
        said: m.FollowerMessage = self._ack(self.follower.ack())
        try:
            while not self._changed.is_set():
                answer = await self._exchange(socket, said)
                if answer is None:
                    continue  # silence: ask again (NNG redials a lost connection)
                self.heard_at = time.monotonic()
                reply = await self._take(answer)
                if reply is not None:
                    said = reply
        finally:
            diagnosis.cancel()
            socket.close()

    async def _diagnose(self, address: str) -> None:
        """No connection to the leader within ``silence``: dial once more, on a socket of
        its own, and log why that fails (the background dialer says nothing)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._connected.wait(), self._silence)
            return
        probe = pynng.Req0(tls_config=dial_config(address, self._tls))
        try:
            dialing = asyncio.to_thread(probe.dial, address, block=True)
            await asyncio.wait_for(dialing, self._silence)
        except pynng.NNGException as exc:
            error, hint = str(exc), _hint(address, exc)
        except TimeoutError:
            error, hint = f"no answer within {self._silence:g} s", "is the leader reachable?"
        else:
            return
        finally:
            probe.close()
        log.warning(
            "replication: cannot connect to the leader; retrying",
            leader=address,
            error=error,
            hint=hint,
        )

    async def _exchange(self, socket: pynng.Req0, said: m.FollowerMessage) -> bytes | None:
        context = socket.new_context()
        exchange = asyncio.ensure_future(_ask(context, m.encode(said)))
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait(
                (exchange, changed), timeout=self._silence, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            changed.cancel()
            if not exchange.done():
                exchange.add_done_callback(_discard)
            with contextlib.suppress(pynng.NNGException):
                context.close()
        if not exchange.done() or exchange.exception() is not None:
            return None
        return exchange.result()

    async def _take(self, data: bytes) -> m.FollowerMessage | None:
        try:
            message = m.decode(data)
        except msgspec.DecodeError as exc:
            log.warning("replication: undecodable message from the leader", error=str(exc))
            return None
        if not isinstance(message, m.Hello | m.Append | m.Snapshot):
            return None
        if isinstance(message, m.Hello) and message.refused == m.UNAUTHORIZED:
            raise Unauthorized(
                "unauthorized",
                "the leader refused this replica: missing or wrong auth token (set "
                "FASTWORKER_AUTH_TOKEN to the same token on every replica)",
            )
        instructions = self.follower.receive(message)
        try:
            reply = await asyncio.to_thread(self._replica.carry_out, instructions)
        except OSError as exc:
            # The disk failed mid-way: start again from what is on disk.
            log.error("replication: cannot write the mirror", error=str(exc))
            self._replica.close()
            self._replica = Replica(self._replica.directory)
            self.follower = self._replica.open()
            return self._ack(self.follower.ack())
        if isinstance(reply, m.Refused):
            log.warning("replication: refused a deposed leader", epoch=message.epoch)
        return None if reply is None else self._ack(reply)

    def _ack(self, said: m.FollowerMessage) -> m.FollowerMessage:
        return msgspec.structs.replace(said, replica=self.name, auth=self._auth)

    def _pipe_up(self, address: str, pipe: int) -> None:
        if address == self._leader:
            self._pipes.add(pipe)
            self._set_lost(False)
            self._connected.set()

    def _pipe_down(self, address: str, pipe: int) -> None:
        if address == self._leader and pipe in self._pipes:
            self._pipes.discard(pipe)
            if not self._pipes:
                self._set_lost(True)
                self._connected.clear()

    def _set_lost(self, lost: bool) -> None:
        (self.lost if lost else self.found).set()
        (self.found if lost else self.lost).clear()

    def close(self) -> None:
        """Release the state dir (after ``run`` has been cancelled)."""
        self._replica.close()


async def _ask(context: pynng.Context, data: bytes) -> bytes:
    await context.asend(data)
    answer: bytes = await context.arecv()
    return answer


def _hint(address: str, error: pynng.NNGException) -> str | None:
    """What to check for a failed dial, where the error alone does not say."""
    tls_failed = isinstance(error, pynng.CryptoError | pynng.AuthenticationError)
    if address.startswith("tls+") and tls_failed:
        return (
            "the TLS handshake failed: the leader's certificate must be signed by the CA "
            "of --tls-ca, and name the host it is dialed at"
        )
    return None


def _call_soon(
    loop: asyncio.AbstractEventLoop, call: Callable[[str, int], None], *args: Any
) -> None:
    """From an NNG thread: ``call(*args)`` on ``loop`` (nothing once it has closed)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(call, *args)


def _discard(done: asyncio.Future[bytes]) -> None:
    if not done.cancelled():
        done.exception()
