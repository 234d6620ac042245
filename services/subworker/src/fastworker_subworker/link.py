"""The subworker's side of the registration port: subworker REQ -> control plane REP."""

from __future__ import annotations

from typing import Protocol, TypeVar

from fastworker.tls import TLS
from fastworker_common.blocking_channel import BlockingChannel
from fastworker_protocol import (
    Ack,
    Assign,
    Codec,
    Drain,
    Fetch,
    Message,
    Outcome,
    Register,
    Registered,
    TaskSignature,
    Unregister,
)
from fastworker_subworker.channel import RequestChannel

M = TypeVar("M", bound=Message)

_MARGIN = 5.0  # seconds a reply may take beyond the time the request asks to be held


class Channel(Protocol):
    """Requests to the registration port: NNG's (``RequestChannel``), or an in-process
    one (the test cluster's)."""

    @property
    def connected(self) -> bool: ...

    async def request(self, message: Message, reply_type: type[M], timeout: float) -> M: ...

    def close(self) -> None: ...


class ControlPlaneLink:
    def __init__(
        self,
        address: str,
        codec: Codec,
        worker_id: str,
        timeout: float,
        auth: str | None = None,
        tls: TLS | None = None,
        *,
        channel: Channel | None = None,
    ) -> None:
        self.address = address
        self.worker_id = worker_id
        self._timeout = timeout
        self._channel = channel or RequestChannel(address, codec, auth, tls)
        # The quick lane's requests, from its thread, on a connection of their own; only
        # where this link speaks NNG itself (an in-process channel has no blocking side).
        self._blocking = None if channel is not None else BlockingChannel(address, codec, auth, tls)

    @property
    def connected(self) -> bool:
        return self._channel.connected

    async def register(
        self,
        name: str,
        concurrency: int,
        tasks: list[TaskSignature],
        queues: dict[str, int] | None = None,
        holding: list[str] | None = None,
    ) -> Registered:
        message = Register(
            worker_id=self.worker_id,
            name=name,
            concurrency=concurrency,
            tasks=tasks,
            confirms=True,
            queues=queues,
            holding=holding,
        )
        return await self._channel.request(message, Registered, self._timeout)

    async def fetch(
        self,
        wait: float,
        prefetch: int,
        started: list[str],
        outcomes: list[Outcome],
        received: list[int],
    ) -> Assign:
        message = self._fetch(wait, prefetch, started, outcomes, received)
        return await self._channel.request(message, Assign, wait + _MARGIN)

    @property
    def blocks(self) -> bool:
        """Whether ``fetch_blocking`` may be called (the link speaks NNG itself)."""
        return self._blocking is not None

    def fetch_blocking(
        self,
        wait: float,
        prefetch: int,
        started: list[str],
        outcomes: list[Outcome],
        received: list[int],
    ) -> Assign:
        """``fetch``, on the calling thread (the quick lane's); the SDK's errors alike."""
        assert self._blocking is not None
        message = self._fetch(wait, prefetch, started, outcomes, received)
        return self._blocking.request(message, Assign, wait + _MARGIN)

    def _fetch(
        self,
        wait: float,
        prefetch: int,
        started: list[str],
        outcomes: list[Outcome],
        received: list[int],
    ) -> Fetch:
        return Fetch(
            worker_id=self.worker_id,
            wait=wait,
            prefetch=prefetch,
            started=started,
            outcomes=outcomes,
            received=received,
        )

    async def drain(self, timeout: float) -> None:
        await self._channel.request(Drain(worker_id=self.worker_id), Ack, timeout)

    async def unregister(self, timeout: float) -> None:
        await self._channel.request(Unregister(worker_id=self.worker_id), Ack, timeout)

    def close(self) -> None:
        """Close both connections; a quick-lane request in progress ends at once
        (``ControlPlaneUnavailable``)."""
        self._channel.close()
        if self._blocking is not None:
            self._blocking.close()
