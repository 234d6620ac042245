"""Blocking discovery for :class:`~fastworker.sync_client.SyncClient`, done on the calling
thread with no event loop in between (its requests go through
``fastworker_common.blocking_channel``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Self

import pynng

from fastworker.tls import TLS
from fastworker_common.discovery import Accept, dial_bus
from fastworker_common.errors import ControlPlaneUnavailable, nothing_announced
from fastworker_common.leader import stale, succeeds
from fastworker_protocol import Announce, Codec, DecodeError, Probe

_PROBE_INTERVAL = 0.25
_POLL = 0.1  # seconds between looks at whether to stop listening


class BlockingBus:
    """The discovery bus, dialed to every discovery address, read on the calling thread:
    the blocking counterpart of ``DiscoveryPeer`` (stale announcements ignored alike)."""

    def __init__(self, address: str, codec: Codec, tls: TLS | None) -> None:
        self.address = address
        self.epoch = 0  # the highest heard
        self._codec = codec
        self._probe = codec.encode(Probe(role="client"))
        self._bus = dial_bus(address, codec, tls, asynchronous=False)

    @property
    def connected(self) -> bool:
        return bool(self._bus.pipes)

    def heard(
        self,
        accept: Accept,
        timeout: float,
        connect_for: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Announce | None:
        """The first announcement ``accept`` takes within ``timeout`` seconds, probing
        every ``_PROBE_INTERVAL``; ``None`` if none, if the bus is still unconnected after
        ``connect_for``, or once ``stop()`` (asked every ``_POLL`` at least)."""
        start = next_probe = time.monotonic()
        while (elapsed := (now := time.monotonic()) - start) < timeout:
            if stop is not None and stop():
                return None
            if connect_for is not None and elapsed >= connect_for and not self.connected:
                return None
            if now >= next_probe:
                with contextlib.suppress(pynng.NNGException):
                    self._bus.send(self._probe, block=False)
                next_probe = now + _PROBE_INTERVAL
            wait = min(start + timeout, next_probe, now + _POLL) - now
            self._bus.recv_timeout = max(1, int(1000 * wait))
            with contextlib.suppress(pynng.Timeout):
                heard = _announce(self._codec, self._bus.recv())
                if heard is not None and not stale(heard, self.epoch):
                    self.epoch = max(self.epoch, heard.epoch)
                    if accept(heard):
                        return heard
        return None

    def close(self) -> None:
        self._bus.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def announcement(
    address: str,
    codec: Codec,
    tls: TLS | None,
    timeout: float,
    connect_timeout: float | None = None,
) -> Announce:
    """The first control plane announcement heard on the discovery bus at ``address`` (one
    or a comma-separated list) within ``timeout`` seconds, probing meanwhile; with
    ``connect_timeout``, give up sooner if the bus has not connected by then. Blocking
    counterpart of ``DiscoveryPeer.announcement``."""
    connect_for = timeout if connect_timeout is None else min(timeout, connect_timeout)
    with BlockingBus(address, codec, tls) as bus:
        heard = bus.heard(lambda _: True, timeout, connect_for)
        connected = bus.connected
    if heard is None:
        within = timeout if connected else connect_for
        raise ControlPlaneUnavailable(nothing_announced(address, within, connected=connected))
    return heard


def successor(
    address: str,
    codec: Codec,
    tls: TLS | None,
    current: Announce,
    timeout: float,
    stop: Callable[[], bool],
) -> Announce | None:
    """An announcement of a leader that replaced ``current``'s, heard within ``timeout``
    (``None``: none, or ``stop()`` came first)."""
    with BlockingBus(address, codec, tls) as bus:
        return bus.heard(lambda a: succeeds(a, current), timeout, stop=stop)


def _announce(codec: Codec, data: bytes) -> Announce | None:
    try:
        message = codec.decode(data)
    except DecodeError:
        return None
    return message if isinstance(message, Announce) else None
