"""The Lease API over HTTPS from inside a pod: the service account's token and CA.

Thin on purpose (three calls, see ``kube_api``); no API server runs where this was written,
so only its JSON form is tested: the calls themselves are proven only on a cluster.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import Any

import aiohttp

from fastworker_control_plane.election.errors import (
    Conflict,
    CoordinatorRefused,
    CoordinatorRejected,
    CoordinatorUnavailable,
)
from fastworker_control_plane.election.kube_api import (
    LEASE_GROUP,
    lease_from_json,
    lease_to_json,
)
from fastworker_control_plane.election.kube_lease import LeaseRecord

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class HttpLease:
    """One Lease on the API server at ``base_url``, as the pod's service account."""

    def __init__(
        self,
        base_url: str,
        namespace: str,
        name: str,
        token_file: Path,
        ca_file: Path | None,
        request_timeout: float,
    ) -> None:
        self.namespace = namespace
        self.name = name
        self._collection = f"{base_url}{LEASE_GROUP}/namespaces/{namespace}/leases"
        self._token_file = token_file
        self._ssl = ssl.create_default_context(cafile=str(ca_file)) if ca_file else None
        self._timeout = aiohttp.ClientTimeout(total=request_timeout)
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def in_cluster(cls, namespace: str | None, name: str, request_timeout: float) -> HttpLease:
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise ValueError("kubernetes:// leader election needs to run in a pod")
        if namespace is None:
            namespace = (SERVICE_ACCOUNT / "namespace").read_text().strip()
        if ":" in host:
            host = f"[{host}]"
        return cls(
            f"https://{host}:{port}",
            namespace,
            name,
            SERVICE_ACCOUNT / "token",
            SERVICE_ACCOUNT / "ca.crt",
            request_timeout,
        )

    async def get(self) -> LeaseRecord | None:
        status, body = await self._call("GET", f"{self._collection}/{self.name}", None)
        return None if status == 404 else lease_from_json(body)

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        body = lease_to_json(record, self.namespace, self.name)
        _, answer = await self._call("POST", self._collection, body)
        return lease_from_json(answer)

    async def replace(self, record: LeaseRecord) -> LeaseRecord:
        body = lease_to_json(record, self.namespace, self.name)
        _, answer = await self._call("PUT", f"{self._collection}/{self.name}", body)
        return lease_from_json(answer)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(
        self, method: str, url: str, body: dict[str, Any] | None
    ) -> tuple[int, dict[str, Any]]:
        if self._session is None:
            self._session = aiohttp.ClientSession(trust_env=False, timeout=self._timeout)
        # Bound service-account tokens rotate: read the file for every request.
        headers = {"Authorization": f"Bearer {self._token_file.read_text().strip()}"}
        try:
            async with self._session.request(
                method, url, json=body, headers=headers, ssl=self._ssl or True
            ) as response:
                status = response.status
                answer = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            raise CoordinatorUnavailable(f"Kubernetes API unreachable: {exc!r}") from exc
        if status == 409:
            raise Conflict("the Lease changed since it was read", code=409)
        if status == 404 and method == "GET":
            return status, {}
        if status in (401, 403):  # the service account's token, or its RBAC
            raise CoordinatorRefused(
                f"the Kubernetes API refused {method} on the Lease with {status}: "
                "check the service account's Role (get, create, update on leases)",
                status,
            )
        if status >= 300 or not isinstance(answer, dict):
            raise CoordinatorRejected(f"Kubernetes API answered {method} with {status}", status)
        return status, answer
