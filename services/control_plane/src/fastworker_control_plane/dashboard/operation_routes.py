"""The HTTP API's operations on tasks (docs/http-api.md, "Failed tasks and cancelling"):
list and show dead letters, retry or purge them, cancel a task.

The handlers only check the request (``actions``: the action header and origin, the
body), call the engine and encode ``views``; the token is the web server's middleware's
job. An action is journaled (``durable``) before it is answered, and noted in the
engine's action log, which the event stream sends to every dashboard watching.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web

from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.dashboard import actions, views
from fastworker_control_plane.dashboard.replies import refused, reply
from fastworker_control_plane.engine import Engine
from fastworker_protocol import ErrorCode
from fastworker_protocol.operations import FailedFilter

SOURCE = "http"  # how the action log names this door
M = TypeVar("M")


class OperationRoutes:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def routes(self) -> list[web.AbstractRouteDef]:
        return [
            web.get("/api/failed", self.list_failed),
            web.post("/api/failed/retry", self.retry_failed),
            web.post("/api/failed/purge", self.purge_failed),
            web.get("/api/failed/{task_id}", self.dead_letter),
            web.post("/api/tasks/{task_id}/cancel", self.cancel),
        ]

    async def list_failed(self, request: web.Request) -> web.Response:
        try:
            query = actions.failed_query(request.query)
        except actions.BadAction as exc:
            return reply({"error": "bad_request", "message": str(exc)}, 400)
        return reply(
            views.failed_list(self.engine.operations.list_failed(query.filter, query.limit))
        )

    async def dead_letter(self, request: web.Request) -> web.Response:
        task_id = request.match_info["task_id"]
        found = self.engine.operations.list_failed(FailedFilter(task_ids=[task_id]), 1).tasks
        if not found:
            message = f"task {task_id} is not a dead letter (unknown, retried, purged or expired)"
            return reply({"error": str(ErrorCode.TASK_NOT_FOUND), "message": message}, 404)
        return reply(views.dead_letter(found[0]))

    async def retry_failed(self, request: web.Request) -> web.Response:
        return await self._on_failed(
            request, self.engine.operations.retry_failed, views.failed_retried
        )

    async def purge_failed(self, request: web.Request) -> web.Response:
        return await self._on_failed(
            request, self.engine.operations.purge_failed, views.failed_purged
        )

    async def _on_failed(
        self,
        request: web.Request,
        act: Callable[[FailedFilter, bool, str], M],
        encode: Callable[[M], dict[str, Any]],
    ) -> web.Response:
        """A retry or purge of the dead letters the body selects, journaled before it is
        answered."""
        try:
            actions.check_origin(request.headers, request.host)
            selection = actions.failed_selection(await request.read())
            done = act(selection.filter, selection.all_matching, SOURCE)
            await self.engine.outbox.durable()
        except (actions.BadAction, actions.ForbiddenAction, Rejected) as exc:
            return refused(exc)
        return reply(encode(done))

    async def cancel(self, request: web.Request) -> web.Response:
        task_id = request.match_info["task_id"]
        try:
            actions.check_origin(request.headers, request.host)
            result, changed = self.engine.cancel(task_id)
            if changed:
                self.engine.operations.acted("task.cancel", task_id, SOURCE)
            await self.engine.outbox.durable()
        except (actions.BadAction, actions.ForbiddenAction, Rejected) as exc:
            return refused(exc)
        return reply(views.cancelled(result, changed))
