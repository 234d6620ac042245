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
from aiohttp.typedefs import Handler, Middleware
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from fastworker_common.health import PortInUse
from fastworker_common.tokens import Tokens

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
        auth: str | Tokens | None = None,
        details: Callable[[], dict[str, object]] | None = None,
    ) -> None:
        """``details``: more to say in ``/readyz``'s JSON, ready or not (a replica's role)."""
        self.host = host
        self._details = details
        self.port = port
        self._metrics = metrics
        self._readiness = readiness
        tokens = Tokens.of(auth)
        self.app = web.Application(middlewares=[] if tokens is None else [token_required(tokens)])
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


def token_required(tokens: Tokens) -> Middleware:
    """With a shared token set, everything but health and static assets needs it: as
    ``Authorization: Bearer <token>`` (tools, Prometheus), or once as ``?token=`` in the
    address bar, which sets a cookie for the dashboard's own requests (an EventSource
    cannot send headers). Compared in constant time; during a rotation the next token is
    accepted too (``Tokens``)."""
    matches = tokens.accepts

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
            offered = request.query["token"]
            response.set_cookie(TOKEN_COOKIE, offered, httponly=True, samesite="Strict")
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
