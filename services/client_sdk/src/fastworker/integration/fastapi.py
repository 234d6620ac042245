"""FastWorker in a FastAPI application: ``fw = FastWorker(app)``.

``FastWorker(app)`` wires a client into the app's lifespan (started with the app, stopped
after it), so each Uvicorn worker process has its own connection to the control plane;
nothing is shared between processes, which is why several workers work. The app never
waits for the control plane to start: the client connects in the background (and keeps
trying while there is none), and until it has, what needs the control plane raises
``ControlPlaneUnavailable``, which the app answers with HTTP 503.

In endpoints, use the instance itself or take it as a dependency::

    fw = FastWorker(app)

    @app.post("/signup")
    async def signup(user: User, worker: Annotated[FastWorker, Depends(fw)]) -> dict[str, str]:
        return {"task_id": await worker.delay("send_welcome_email", user.email)}

``fw.router()`` is a ready-made, opt-in API (``app.include_router(fw.router())``): submit
a task by name, read its status and result, cancel it, and follow it as server-sent
events. It exposes every registered task to whoever can reach the app: mount it behind
your own authentication.

Needs ``fastapi`` (``pip install 'fastworker[fastapi]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
from fastapi import APIRouter, FastAPI, HTTPException, Response
from fastapi import Request as HTTPRequest
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from fastworker.client import Client
from fastworker.errors import (
    ControlPlaneUnavailable,
    FastWorkerError,
    InvalidArguments,
    QueueFull,
    RequestRejected,
    TaskNotFound,
    Timeout,
    UnknownTask,
)
from fastworker_protocol import DEFAULT_DISCOVERY_ADDRESS, Priority, TaskResult
from fastworker_protocol.queues import QUEUE_PATTERN

__all__ = ["FastWorker", "SubmitRequest"]

WORKER_REFRESH = 2.0  # seconds between refreshes of ``worker_count``
EVENT_POLL = 0.2  # seconds between status checks of an event stream
MAX_WAIT = 60.0  # longest ``/result?wait=`` the router holds a request
CONNECT_RETRY = (0.5, 5.0)  # first and longest pause between attempts to connect

log = logging.getLogger("fastworker.fastapi")


class SubmitRequest(BaseModel):
    """The body of ``POST {prefix}/{task_name}``."""

    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    priority: Priority | None = None
    countdown: float | None = Field(default=None, ge=0)
    idempotency_key: str | None = None
    queue: str | None = Field(default=None, pattern=QUEUE_PATTERN)


class FastWorker:
    def __init__(
        self,
        app: FastAPI | None = None,
        discovery_address: str | None = None,
        **client_options: Any,
    ) -> None:
        """``discovery_address`` defaults to ``FASTWORKER_DISCOVERY_ADDRESS`` (else
        ``tcp://127.0.0.1:5550``); ``client_options`` go to :class:`fastworker.Client`
        (``address``, ``timeout``, ``auth_token``, ``tls``...). With ``app``, the client
        follows its lifespan; without, call ``start``/``stop`` (or ``async with fw``)."""
        discovery = discovery_address or os.environ.get("FASTWORKER_DISCOVERY_ADDRESS")
        self.client = Client(discovery or DEFAULT_DISCOVERY_ADDRESS, **client_options)
        self._worker_count = 0
        self._refresher: asyncio.Task[None] | None = None
        self._connector: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._last_error: FastWorkerError | None = None
        if app is not None:
            self.attach(app)

    def attach(self, app: FastAPI) -> None:
        """Start with ``app``'s lifespan and stop with it, around any lifespan it has."""
        inner = app.router.lifespan_context

        @contextlib.asynccontextmanager
        async def lifespan(app: FastAPI) -> AsyncIterator[Any]:
            async with self, inner(app) as state:
                yield state

        app.router.lifespan_context = lifespan
        app.exception_handlers.setdefault(ControlPlaneUnavailable, _unavailable)

    async def start(self) -> None:
        """Start connecting in the background; returns at once, and never raises for a
        control plane that is not there (yet)."""
        self._connected = asyncio.Event()
        self._connector = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        pause = CONNECT_RETRY[0]
        while True:
            try:
                await self.client.start()
                break
            except FastWorkerError as exc:
                self._last_error = exc
                log.warning("no control plane yet, retrying in %g s: %s", pause, exc)
            await asyncio.sleep(pause)
            pause = min(2 * pause, CONNECT_RETRY[1])
        self._connected.set()
        await self._refresh_workers()
        self._refresher = asyncio.get_running_loop().create_task(self._keep_refreshing())

    @property
    def connected(self) -> bool:
        """Whether the client is connected to a control plane now (for a readiness probe:
        until then, what needs the control plane answers 503)."""
        return self._connected.is_set()

    async def ready(self) -> Client:
        """The connected client. While the first attempt to connect is under way it waits
        for it (up to ``connect_timeout``); once an attempt has failed, it fails fast:
        ``ControlPlaneUnavailable`` at once, until the background retries connect."""
        if not self._connected.is_set() and self._last_error is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._connected.wait(), self.client.connect_timeout)
        if not self._connected.is_set():
            where = self.client._settings.address or self.client.discovery_address
            last = f": {self._last_error}" if self._last_error else ""
            raise ControlPlaneUnavailable(f"not connected to a control plane ({where}) yet{last}")
        return self.client

    async def stop(self) -> None:
        for task in (self._connector, self._refresher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._connector = self._refresher = None
        await self.client.aclose()

    async def __aenter__(self) -> FastWorker:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def __call__(self) -> FastWorker:
        """``Depends(fw)`` hands endpoints this instance."""
        return self

    # --- what endpoints use ------------------------------------------------------------

    async def delay(self, task: Any, *args: Any, **kwargs: Any) -> str:
        """Queue ``task`` (a name or an ``@task`` function) and return its id at once;
        the keyword arguments are those of :meth:`fastworker.Client.delay`."""
        return await (await self.ready()).delay(task, *args, **kwargs)

    async def result(self, task_id: str, timeout: float | None = None) -> TaskResult:
        """The task's result once it is final (raises ``Timeout`` past ``timeout``)."""
        return await (await self.ready()).wait_result(task_id, timeout)

    async def status(self, task_id: str) -> TaskResult | None:
        """The task as it is now (``None`` if unknown or expired)."""
        return await (await self.ready()).get_task_result(task_id)

    @property
    def worker_count(self) -> int:
        """Workers registered with the control plane (refreshed every 2 s)."""
        return self._worker_count

    async def _refresh_workers(self) -> None:
        with contextlib.suppress(FastWorkerError):
            self._worker_count = len(await self.client.list_workers())

    async def _keep_refreshing(self) -> None:
        while True:
            await asyncio.sleep(WORKER_REFRESH)
            await self._refresh_workers()

    # --- the opt-in API ----------------------------------------------------------------

    def router(self, prefix: str = "/tasks", **router_options: Any) -> APIRouter:
        """Submit, status, result, cancel and an event stream, under ``prefix``."""
        router = APIRouter(prefix=prefix, **router_options)

        @router.post("/{task_name}", status_code=202)
        async def submit(task_name: str, body: SubmitRequest) -> dict[str, str]:
            with _http_errors():
                await self.ready()
                task_id = await self.client.apply_async(
                    task_name,
                    body.args,
                    body.kwargs,
                    priority=body.priority,
                    countdown=body.countdown,
                    idempotency_key=body.idempotency_key,
                    queue=body.queue,
                )
            return {"task_id": task_id}

        @router.get("/{task_id}")
        async def status(task_id: str) -> Any:
            return _as_json(await self._known(task_id))

        @router.get("/{task_id}/result")
        async def result(task_id: str, response: Response, wait: float = 0.0) -> Any:
            found = await self._known(task_id)
            if not found.status.is_final and wait > 0:
                with _http_errors(), contextlib.suppress(Timeout):
                    found = await self.client.wait_result(task_id, min(wait, MAX_WAIT))
            if not found.status.is_final:
                response.status_code = 202
            return _as_json(found)

        @router.delete("/{task_id}")
        async def cancel(task_id: str) -> dict[str, Any]:
            with _http_errors():
                await self.ready()
                changed = await self.client.cancel_task(task_id)
            return {"task_id": task_id, "cancelled": changed}

        @router.get("/{task_id}/events")
        async def events(task_id: str) -> StreamingResponse:
            first = await self._known(task_id)
            return StreamingResponse(
                self._event_stream(first),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )

        return router

    async def _known(self, task_id: str) -> TaskResult:
        with _http_errors():
            found = await (await self.ready()).get_task_result(task_id)
        if found is None:
            raise HTTPException(404, f"task {task_id} is unknown or its result has expired")
        return found

    async def _event_stream(self, current: TaskResult) -> AsyncIterator[bytes]:
        """One ``status`` event per change of the task's state, ending with the final one."""
        yield _sse(current)
        while not current.status.is_final:
            await asyncio.sleep(EVENT_POLL)
            try:
                latest = await self.client.get_task_result(current.task_id)
            except FastWorkerError as exc:
                yield f"event: error\ndata: {json.dumps({'detail': str(exc)})}\n\n".encode()
                return
            if latest is None:
                return
            if latest.status != current.status:
                yield _sse(latest)
            current = latest


async def _unavailable(request: HTTPRequest, exc: Exception) -> JSONResponse:
    """``ControlPlaneUnavailable`` out of any endpoint: 503, so callers retry later."""
    return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "1"})


def _as_json(result: TaskResult) -> Any:
    return msgspec.to_builtins(result)


def _sse(result: TaskResult) -> bytes:
    data = msgspec.json.encode(result).decode()
    return f"event: status\nid: {result.status}\ndata: {data}\n\n".encode()


@contextlib.contextmanager
def _http_errors() -> Iterator[None]:
    """The SDK's errors as the HTTP statuses a caller of the API can act on."""
    try:
        yield
    except (UnknownTask, TaskNotFound) as exc:
        raise HTTPException(404, str(exc)) from None
    except InvalidArguments as exc:
        raise HTTPException(422, str(exc)) from None
    except QueueFull as exc:
        raise HTTPException(503, str(exc), headers={"Retry-After": "1"}) from None
    except (ControlPlaneUnavailable, Timeout) as exc:
        raise HTTPException(503, str(exc)) from None
    except RequestRejected as exc:
        raise HTTPException(400, str(exc)) from None
