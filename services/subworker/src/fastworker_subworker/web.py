"""The HTTP side of a FastWorker process: ``/healthz``, ``/readyz`` and ``/metrics``, plus
whatever routes the process adds (the control plane adds its dashboard and JSON API).

Health is for orchestrators: ``/healthz`` answers while the event loop runs; ``/readyz``
answers 200 only while ``readiness()`` returns ``None`` (otherwise 503 with the reason).
No task ever travels over HTTP.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
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
        auth: str | None = None,
        details: Callable[[], dict[str, object]] | None = None,
    ) -> None:
        """``details``: more to say in ``/readyz``'s JSON, ready or not (a replica's role)."""
        self.host = host
        self._details = details
        self.port = port
        self._metrics = metrics
        self._readiness = readiness
        self.app = web.Application(middlewares=[] if auth is None else [token_required(auth)])
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
        details = {} if self._details is None else self._details()
        if reason is None:
            return web.json_response({"status": "ready", **details})
        return web.json_response({"status": reason, **details}, status=503)

    async def _metrics_text(self, request: web.Request) -> web.Response:
        body = generate_latest(self._metrics)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


OPEN_PATHS = ("/healthz", "/readyz", "/static/")  # health for orchestrators; page assets
TOKEN_COOKIE = "fastworker_token"


def token_required(token: str) -> Middleware:
    """With a shared token set, everything but health and static assets needs it: as
    ``Authorization: Bearer <token>`` (tools, Prometheus), or once as ``?token=`` in the
    address bar, which sets a cookie for the dashboard's own requests (an EventSource
    cannot send headers). Compared in constant time."""
    expected = token.encode()

    def matches(offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(offered.encode(), expected)

    @web.middleware
    async def check_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(OPEN_PATHS):
            return await handler(request)
        bearer = request.headers.get("Authorization", "")
        if matches(bearer.removeprefix("Bearer ")) or matches(request.cookies.get(TOKEN_COOKIE)):
            return await handler(request)
        if matches(request.query.get("token")):
            # Drop the token from the address bar (and from history) once the cookie is set.
            rest = {k: v for k, v in request.rel_url.query.items() if k != "token"}
            response = web.HTTPFound(request.rel_url.with_query(rest))
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict")
            raise response
        return web.json_response(
            {
                "error": "unauthorized",
                "message": "this control plane requires its token: send "
                "'Authorization: Bearer <token>', or open /?token=<token> once",
            },
            status=401,
        )

    return check_token
