"""Reading and writing one Lease: the interface the Kubernetes elector drives, an in-memory
stand-in for tests, and the JSON form of the Lease (pure).

The real API server is reached with three calls (``coordination.k8s.io/v1``)::

    GET  /apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}   200 Lease | 404
    POST /apis/coordination.k8s.io/v1/namespaces/{ns}/leases          201 Lease | 409 exists
    PUT  /apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}   200 Lease | 409 conflict

The PUT body carries ``metadata.resourceVersion`` as read; the server answers 409 when the
Lease changed since. The RBAC a pod needs: get, create, update on that one Lease.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

from fastworker_control_plane.election.errors import Conflict, CoordinatorUnavailable
from fastworker_control_plane.election.kube_lease import LeaseRecord

ADDRESSES_ANNOTATION = "fastworker.io/leader-addresses"
LEASE_GROUP = "/apis/coordination.k8s.io/v1"


class LeaseApi(Protocol):
    """One Lease on one API server; writes raise ``Conflict`` on 409."""

    async def get(self) -> LeaseRecord | None: ...

    async def create(self, record: LeaseRecord) -> LeaseRecord: ...

    async def replace(self, record: LeaseRecord) -> LeaseRecord: ...

    async def close(self) -> None: ...


class InMemoryLease:
    """A Lease held in memory with the API server's optimistic concurrency, for tests."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self._version = 0
        self.available = True

    def _check(self) -> None:
        if not self.available:
            raise CoordinatorUnavailable("in-memory API server is down")

    def _stamp(self, record: LeaseRecord) -> LeaseRecord:
        self._version += 1
        self.record = replace(record, resource_version=str(self._version))
        return self.record

    async def get(self) -> LeaseRecord | None:
        self._check()
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        if self.record is not None:
            raise Conflict("lease already exists", code=409)
        return self._stamp(record)

    async def replace(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        if self.record is None or self.record.resource_version != record.resource_version:
            raise Conflict("the lease changed since it was read", code=409)
        return self._stamp(record)

    async def close(self) -> None:
        return None


def _time(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def lease_to_json(record: LeaseRecord, namespace: str, name: str) -> dict[str, Any]:
    """The Lease object to POST or PUT for ``record``."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "annotations": {ADDRESSES_ANNOTATION: ",".join(record.addresses)},
    }
    if record.labels:
        metadata["labels"] = dict(record.labels)
    if record.resource_version:
        metadata["resourceVersion"] = record.resource_version
    spec: dict[str, Any] = {
        "holderIdentity": record.holder,
        "leaseDurationSeconds": record.lease_duration_seconds,
        "leaseTransitions": record.lease_transitions,
    }
    for field, value in (("acquireTime", record.acquire_time), ("renewTime", record.renew_time)):
        if value is not None:
            spec[field] = _time(value)
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": spec,
    }


def lease_from_json(obj: dict[str, Any]) -> LeaseRecord:
    """The record of a Lease object as the API server returned it."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    annotations = metadata.get("annotations") or {}
    addresses = tuple(a for a in str(annotations.get(ADDRESSES_ANNOTATION, "")).split(",") if a)
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=_parse_time(spec.get("acquireTime")),
        renew_time=_parse_time(spec.get("renewTime")),
        lease_transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=str(metadata.get("resourceVersion") or ""),
        addresses=addresses,
        labels=tuple(sorted((str(k), str(v)) for k, v in (metadata.get("labels") or {}).items())),
    )
