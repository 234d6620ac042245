"""The subworker's side of the registration port: subworker REQ -> control plane REP."""

from __future__ import annotations

from typing import Protocol, TypeVar

from fastworker.tls import TLS
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

    @property
    def connected(self) -> bool:
        return self._channel.connected

    async def register(
        self,
        name: str,
        concurrency: int,
        tasks: list[TaskSignature],
        queues: dict[str, int] | None = None,
    ) -> Registered:
        message = Register(
            worker_id=self.worker_id,
            name=name,
            concurrency=concurrency,
            tasks=tasks,
            confirms=True,
            queues=queues,
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
        message = Fetch(
            worker_id=self.worker_id,
            wait=wait,
            prefetch=prefetch,
            started=started,
            outcomes=outcomes,
            received=received,
        )
        return await self._channel.request(message, Assign, wait + _MARGIN)

    async def drain(self, timeout: float) -> None:
        await self._channel.request(Drain(worker_id=self.worker_id), Ack, timeout)

    async def unregister(self, timeout: float) -> None:
        await self._channel.request(Unregister(worker_id=self.worker_id), Ack, timeout)

    def close(self) -> None:
        self._channel.close()
