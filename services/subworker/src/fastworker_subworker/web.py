"""The HTTP side of a FastWorker process: ``/healthz``, ``/readyz`` and ``/metrics``, plus
whatever routes the process adds (the control plane adds its dashboard and JSON API).

Health is for orchestrators: ``/healthz`` answers while the event loop runs; ``/readyz``
answers 200 only while ``readiness()`` returns ``None`` (otherwise 503 with the reason).
No task ever travels over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from fastworker_subworker.health import PortInUse

log = structlog.get_logger(__name__)

Readiness = Callable[[], str | None]  # None when ready, else why not ("starting", ...)


class WebServer:
    def __init__(
        self,
        host: str,
        port: int,
        metrics: CollectorRegistry,
        readiness: Readiness,
        routes: Iterable[web.AbstractRouteDef] = (),
    ) -> None:
        self.host = host
        self.port = port
        self._metrics = metrics
        self._readiness = readiness
        self.app = web.Application()
        self.app.add_routes(
            [
                web.get("/healthz", self._healthz),
                web.get("/readyz", self._readyz),
                web.get("/metrics", self._metrics_text),
                *routes,
            ]
        )
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        # Long-lived responses (the event stream) must not hold up shutdown.
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await self.close()
            raise PortInUse(
                f"cannot serve HTTP on {self.host}:{self.port} ({exc.strerror}): is another "
                "process using the port? (choose another with --http-port/--metrics-port)"
            ) from None
        log.info("http listening", url=f"http://{self.host}:{self.port}/")

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        reason = self._readiness()
        if reason is None:
            return web.json_response({"status": "ready"})
        return web.json_response({"status": reason}, status=503)

    async def _metrics_text(self, request: web.Request) -> web.Response:
        body = generate_latest(self._metrics)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
