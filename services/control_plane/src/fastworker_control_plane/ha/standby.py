"""What a follower serves: discovery (announcing its leader) and HTTP (health, metrics,
``/readyz`` saying it is not the leader). No client port: only the leader binds those."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pynng
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from fastworker_common.health import PortInUse
from fastworker_common.supervision import Policy, Supervisor
from fastworker_control_plane.config import ControlPlaneConfig
from fastworker_control_plane.servers.discovery import DiscoveryAnnouncer
from fastworker_protocol import Announce, Codec

if TYPE_CHECKING:
    from fastworker_common.web import Readiness, WebServer


class Standby:
    def __init__(
        self,
        config: ControlPlaneConfig,
        collector: Collector,
        readiness: Readiness,
        details: Callable[[], dict[str, object]],
        supervisor: Supervisor,
    ) -> None:
        self._config = config
        self._supervisor = supervisor
        codec = Codec(config.max_message_size)
        self._bus = pynng.Bus0(
            recv_max_size=2 * codec.max_message_size,
            async_backend="asyncio",
            tls_config=None if config.tls is None else config.tls.listening(),
        )
        self._announcer = DiscoveryAnnouncer(self._bus, codec, None, config.announce_interval)
        self._web: WebServer | None = None
        if config.http_port:
            from fastworker_common.web import WebServer  # aiohttp: only when serving HTTP

            metrics = CollectorRegistry(auto_describe=True)
            metrics.register(collector)
            self._web = WebServer(
                config.bind_host,
                config.http_port,
                metrics,
                readiness,
                auth=config.tokens,
                details=details,
            )

    async def start(self) -> None:
        address = self._config.bind(self._config.discovery_port)
        try:
            self._bus.listen(address)
        except pynng.AddressInUse:
            raise PortInUse(
                f"{address} is already in use (choose another --discovery-port)"
            ) from None
        # A follower goes on without its announcer, as a leader does not (it stops).
        for name, task in self._announcer.start().items():
            self._supervisor.watch(name, task, policy=Policy.LOG)
        if self._web is not None:
            await self._web.start()

    def announce(self, announce: Announce | None) -> None:
        self._announcer.update(announce)

    async def close(self) -> None:
        if self._web is not None:
            await self._web.close()
        await self._announcer.close()
