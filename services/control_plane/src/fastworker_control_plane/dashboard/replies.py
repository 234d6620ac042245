"""How the HTTP API answers: JSON documents, and refusals with a stable error code (a wire
error code keeps its meaning over HTTP). Shared by the route modules."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.dashboard import actions
from fastworker_protocol import ErrorCode

_json = msgspec.json.Encoder()

STATUS = {
    ErrorCode.INVALID_MESSAGE: 400,
    ErrorCode.TASK_NOT_FOUND: 404,
    ErrorCode.QUEUE_FULL: 503,  # retry later
    ErrorCode.SHUTTING_DOWN: 503,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.INTERNAL: 500,
}


def encode(document: Any) -> bytes:
    return _json.encode(document)


def reply(document: Any, status: int = 200) -> web.Response:
    return web.Response(body=_json.encode(document), status=status, content_type="application/json")


def refused(exc: actions.BadAction | actions.ForbiddenAction | Rejected) -> web.Response:
    if isinstance(exc, actions.ForbiddenAction):
        return reply({"error": "forbidden", "message": str(exc)}, 403)
    if isinstance(exc, actions.BadAction):
        return reply({"error": str(ErrorCode.INVALID_MESSAGE), "message": str(exc)}, 400)
    return reply({"error": str(exc.code), "message": exc.message}, STATUS.get(exc.code, 400))
