"""What a follower serves: discovery (announcing its leader), HTTP (health, metrics,
``/readyz`` saying it is not the leader), and the leader's client ports, where every
request is answered ``unavailable`` with where the leader is (``redirect``): a client
given this replica's address, or one still on a deposed leader's, is told, not left
with a refused connection. Requests are checked as a leader checks them (the auth token
first, then whether the port serves the op) before that answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import pynng
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from fastworker_common.health import PortInUse
from fastworker_common.supervision import Policy, Supervisor
from fastworker_control_plane.config import ControlPlaneConfig
from fastworker_control_plane.servers import registration, results, submission
from fastworker_control_plane.servers.discovery import DiscoveryAnnouncer
from fastworker_control_plane.servers.reply_server import ReplyServer
from fastworker_protocol import Announce, Codec, Message, Priority

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
        redirect: Callable[[], str],
    ) -> None:
        self._config = config
        self._supervisor = supervisor
        self._redirect = redirect
        codec = self._codec = Codec(config.max_message_size)
        self._bus = pynng.Bus0(
            recv_max_size=2 * codec.max_message_size,
            async_backend="asyncio",
            tls_config=None if config.tls is None else config.tls.listening(),
        )
        self._servers: list[ReplyServer] = []
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
        ports = self._config.ports
        for port, serves in [
            *((ports.submission(p), submission.SERVES) for p in Priority.by_rank()),
            (ports.results, results.SERVES),
            (ports.registration, registration.SERVES),
        ]:
            self._redirect_at(self._config.bind(port), serves)

    def _redirect_at(self, address: str, serves: tuple[type[Message], ...]) -> None:
        """Answer every request at ``address`` with where the leader is. A port taken
        (say the leader's, on this host) is left alone: the redirect is a courtesy."""
        socket = pynng.Rep0(
            recv_max_size=2 * self._codec.max_message_size,
            async_backend="asyncio",
            tls_config=None if self._config.tls is None else self._config.tls.listening(),
        )
        try:
            socket.listen(address)
        except pynng.NNGException:
            socket.close()
            return
        server = ReplyServer(
            "standby",
            socket,
            self._codec,
            _never,
            serves,
            self._config.tokens,
            fence=self._redirect,
        )
        server.start()
        self._servers.append(server)

    def announce(self, announce: Announce | None) -> None:
        self._announcer.update(announce)

    async def close(self) -> None:
        for server in self._servers:
            await server.close(grace=0)
        if self._web is not None:
            await self._web.close()
        await self._announcer.close()


async def _never(message: Message, pipe_id: int) -> NoReturn:
    raise AssertionError("a standby answers every request from its fence")
