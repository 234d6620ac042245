"""A minimal asyncio client for etcd's v3 JSON gateway: POST JSON, read JSON, stream watches.

It only moves bytes: every request body and response reading lives in ``_etcd_wire``.
Endpoints are tried in order, starting with the last one that answered. Proxy settings from
the environment are ignored: etcd is reached directly.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator

import aiohttp

from fastworker_control_plane.election._etcd_wire import JSON
from fastworker_control_plane.election.errors import (
    CoordinatorRefused,
    CoordinatorRejected,
    CoordinatorUnavailable,
)

# etcd refuses a client without credentials when its auth is on: gRPC's UNAUTHENTICATED or
# PERMISSION_DENIED, or (3.4, HTTP 400, INVALID_ARGUMENT) one of these messages.
REFUSED_CODES = (16, 7)
REFUSED_MESSAGES = ("etcdserver: user name is empty", "etcdserver: authentication failed")


class EtcdHttp:
    def __init__(self, endpoints: tuple[str, ...], request_timeout: float) -> None:
        self._endpoints = endpoints
        self._preferred = 0
        self._timeout = request_timeout
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(trust_env=False)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _order(self) -> list[int]:
        n = len(self._endpoints)
        return [(self._preferred + i) % n for i in range(n)]

    async def post(self, path: str, body: JSON, timeout: float | None = None) -> JSON:
        """One request, to the first endpoint that answers within ``timeout``."""
        session = self._open()
        limit = aiohttp.ClientTimeout(total=self._timeout if timeout is None else timeout)
        failures: list[str] = []
        for index in self._order():
            url = f"http://{self._endpoints[index]}{path}"
            try:
                async with session.post(url, json=body, timeout=limit) as response:
                    text = await response.text()
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                failures.append(f"{self._endpoints[index]}: {exc!r}")
                continue
            self._preferred = index
            return _decode(text, response.status)
        raise CoordinatorUnavailable("etcd unreachable: " + "; ".join(failures))

    async def watch(self, body: JSON) -> AsyncGenerator[JSON, None]:
        """The messages of one watch stream, until the caller stops or the stream ends."""
        session = self._open()
        limit = aiohttp.ClientTimeout(total=None, sock_connect=self._timeout)
        index = self._preferred
        url = f"http://{self._endpoints[index]}/v3/watch"
        try:
            async with session.post(url, json=body, timeout=limit) as response:
                if response.status != 200:
                    _decode(await response.text(), response.status)
                while True:
                    line = await response.content.readline()
                    if not line:
                        return
                    if line.strip():
                        yield _decode(line.decode(), 200)
        except (aiohttp.ClientError, OSError) as exc:
            self._preferred = (index + 1) % len(self._endpoints)
            raise CoordinatorUnavailable(f"etcd watch broke: {exc!r}") from exc


def _decode(text: str, status: int) -> JSON:
    try:
        data = json.loads(text) if text else {}
    except ValueError as exc:
        raise CoordinatorRejected(f"etcd answered HTTP {status} with non-JSON") from exc
    if not isinstance(data, dict):
        raise CoordinatorRejected(f"etcd answered HTTP {status} with {type(data).__name__}")
    if status != 200 or ("error" in data and "result" not in data):
        code = int(data.get("code", 0))
        said = data.get("message") or data.get("error") or status
        if status in (401, 403) or code in REFUSED_CODES or str(said).startswith(REFUSED_MESSAGES):
            raise CoordinatorRefused(
                f"etcd refused this control plane (HTTP {status}): {said}", code=code
            )
        raise CoordinatorRejected(f"etcd error: {said}", code=code)
    return data
