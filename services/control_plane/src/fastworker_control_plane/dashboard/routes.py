"""The dashboard's HTTP routes: the page and its assets, the JSON API and the event
stream (docs/http-api.md); the operations on tasks (dead letters, cancel) are
``operation_routes``'. Handlers only parse the request (``actions`` checks the action
requests) and encode ``views`` (and ``replicas``, a replicated leader's followers)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.dashboard import actions, replicas, views
from fastworker_control_plane.dashboard.operation_routes import SOURCE, OperationRoutes
from fastworker_control_plane.dashboard.replies import encode
from fastworker_control_plane.dashboard.replies import refused as _refused
from fastworker_control_plane.dashboard.replies import reply as _reply
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.events import TooManySubscriptions
from fastworker_protocol import TaskState

STATIC = Path(__file__).parent / "static"
FLUSH_INTERVAL = 0.2  # seconds between batches of task events on the stream
SNAPSHOT_EVERY = 5  # flushes between snapshots (one a second)
MAX_EVENTS_PER_FLUSH = 2_000


class BadRequest(ValueError):
    pass


class DashboardRoutes:
    def __init__(
        self, engine: Engine, me: views.Identity, replica_set: replicas.Reader = replicas.alone
    ) -> None:
        """``replica_set``: this control plane's replicas, read at each request."""
        self.engine = engine
        self.me = me
        self.replica_set = replica_set

    def routes(self) -> list[web.AbstractRouteDef]:
        return [
            web.get("/", self.index),
            web.static("/static", STATIC),
            web.get("/api/overview", self.overview),
            web.get("/api/workers", self.workers),
            web.get("/api/tasks", self.tasks),
            web.get("/api/tasks/{task_id}", self.task),
            web.get("/api/workflows/{workflow_id}", self.workflow),
            web.get("/api/registered", self.registered),
            web.get("/api/schedules", self.schedules),
            web.get("/api/throughput", self.throughput),
            web.get("/api/queues", self.queues),
            web.post("/api/queues/{name}/{action:pause|resume|purge}", self.queue_action),
            web.get("/api/limits", self.limits),
            web.get("/api/replicas", self.list_replicas),
            web.post("/api/limits/{scope}/{name}", self.set_limit),
            web.get("/api/actions", self.list_actions),
            web.get("/api/events", self.events),
            *OperationRoutes(self.engine).routes(),
        ]

    @property
    def now(self) -> float:
        return self.engine.clock()

    async def index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html")

    async def overview(self, request: web.Request) -> web.Response:
        return _reply(views.overview(self.engine, self.me))

    async def workers(self, request: web.Request) -> web.Response:
        return _reply(views.workers(self.engine, self.now))

    async def tasks(self, request: web.Request) -> web.Response:
        def parse() -> list[Any]:
            limit = _int_param(request, "limit", 100, 1, 1000)
            status = request.query.get("status")
            try:
                state = TaskState(status) if status else None
            except ValueError:
                raise BadRequest(f"status must be one of {[str(s) for s in TaskState]}") from None
            results = self.engine.view.list_tasks(state, limit, self.now)
            return [views.task_summary(r) for r in results]

        return _answer(parse)

    async def task(self, request: web.Request) -> web.Response:
        task_id = request.match_info["task_id"]
        record = self.engine.view.task(task_id, self.now)
        if record is None:
            message = f"task {task_id} is unknown or its result has expired"
            return _reply({"error": "task_not_found", "message": message}, 404)
        return _reply(views.task_detail(record))

    async def workflow(self, request: web.Request) -> web.Response:
        workflow_id = request.match_info["workflow_id"]
        try:
            info = self.engine.workflows.info(workflow_id)
        except Rejected as exc:  # unknown, or evicted once final past its TTL
            return _reply({"error": str(exc.code), "message": exc.message}, 404)
        return _reply(views.workflow(info))

    async def registered(self, request: web.Request) -> web.Response:
        return _reply(views.registered(self.engine))

    async def schedules(self, request: web.Request) -> web.Response:
        return _reply(views.schedules(self.engine, self.now))

    async def throughput(self, request: web.Request) -> web.Response:
        return _answer(
            lambda: views.throughput(
                self.engine, self.now, _int_param(request, "window", 300, 1, 600)
            )
        )

    async def queues(self, request: web.Request) -> web.Response:
        return _reply(views.queues(self.engine, self.now))

    async def limits(self, request: web.Request) -> web.Response:
        return _reply(views.limits(self.engine, self.now))

    async def list_replicas(self, request: web.Request) -> web.Response:
        return _reply(replicas.document(self.replica_set()))

    async def queue_action(self, request: web.Request) -> web.Response:
        try:
            actions.check_origin(request.headers, request.host)
            queue = actions.queue_name(request.match_info["name"])
            action = request.match_info["action"]
            purged = 0
            if action == "purge":
                purged = self.engine.operations.purge_queue(queue)
                self.engine.operations.acted("queue.purge", queue, SOURCE, purged=purged)
            else:
                self.engine.operations.pause_queue(queue, action == "pause")
                self.engine.operations.acted(f"queue.{action}", queue, SOURCE)
            await self.engine.outbox.durable()
        except (actions.BadAction, actions.ForbiddenAction, Rejected) as exc:
            return _refused(exc)
        return _reply(views.queue_acted(self.engine, queue, purged))

    async def set_limit(self, request: web.Request) -> web.Response:
        try:
            actions.check_origin(request.headers, request.host)
            change = actions.limit_change(
                request.match_info["scope"], request.match_info["name"], await request.read()
            )
            self.engine.operations.set_limit(
                change.scope, change.name, change.rate, change.concurrency, reset=change.reset
            )
            self.engine.operations.acted(
                "limit.set",
                f"{change.scope}:{change.name}",
                SOURCE,
                rate=change.rate,
                concurrency=change.concurrency,
                reset=change.reset,
            )
            await self.engine.outbox.durable()
        except (actions.BadAction, actions.ForbiddenAction, Rejected) as exc:
            return _refused(exc)
        return _reply(views.limits(self.engine, self.now))

    async def list_actions(self, request: web.Request) -> web.Response:
        """The operators' actions kept (the newest ``limit``), oldest first: what the
        stream's ``actions`` events sent before this page connected."""

        def build() -> list[Any]:
            limit = _int_param(request, "limit", 100, 1, 1000)
            return [views.action(a) for a in self.engine.actions.since(0)[-limit:]]

        return _answer(build)

    async def events(self, request: web.Request) -> web.StreamResponse:
        """Task transitions in batches, and a snapshot every second, until the client
        goes away or the server stops."""
        try:
            subscription = self.engine.subscribe()
        except TooManySubscriptions as exc:
            return _reply({"error": "too_many_streams", "message": str(exc)}, 503)
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",  # tell proxies not to buffer the stream
            }
        )
        seen_action = self.engine.actions.last_seq  # a new stream gets new actions only
        try:
            await response.prepare(request)
            await response.write(b"retry: 2000\n\n")
            tick = 0
            while True:
                chunk = b""
                batch = subscription.take(MAX_EVENTS_PER_FLUSH)
                if batch:
                    chunk += _sse("tasks", [views.event(e) for e in batch])
                if self.engine.actions.last_seq > seen_action:
                    acted = self.engine.actions.since(seen_action)
                    seen_action = self.engine.actions.last_seq
                    chunk += _sse("actions", [views.action(a) for a in acted])
                if tick % SNAPSHOT_EVERY == 0:
                    chunk += _sse("snapshot", views.snapshot(self.engine, self.me, self.now))
                    chunk += _sse("queues", views.queue_state(self.engine, self.now))
                    if (replica_set := self.replica_set()) is not None:
                        chunk += _sse("replicas", replicas.document(replica_set))
                if chunk:
                    await response.write(chunk)
                tick += 1
                await asyncio.sleep(FLUSH_INTERVAL)
        except ConnectionResetError:
            pass  # the browser went away
        finally:
            subscription.close()
        return response


def _sse(event: str, data: Any) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + encode(data) + b"\n\n"


def _answer(build: Callable[[], Any]) -> web.Response:
    try:
        return _reply(build())
    except BadRequest as exc:
        return _reply({"error": "bad_request", "message": str(exc)}, 400)


def _int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, not {raw!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be between {low} and {high}")
    return value
