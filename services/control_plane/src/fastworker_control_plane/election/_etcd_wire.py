"""Request bodies and response readers for etcd's v3 JSON gateway (grpc-gateway); no I/O.

The gateway takes and returns the gRPC messages as JSON: bytes are base64 strings, 64-bit
integers are decimal strings, and fields at their default value (0, false, empty) are left
out. It is served at ``/v3/`` by etcd 3.4 and later (3.3 used ``/v3beta/``).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from fastworker_control_plane.election.terms import Term

JSON = dict[str, Any]

GRANT = "/v3/lease/grant"
KEEPALIVE = "/v3/lease/keepalive"
REVOKE = "/v3/lease/revoke"
RANGE = "/v3/kv/range"
TXN = "/v3/kv/txn"
WATCH = "/v3/watch"


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


@dataclass(frozen=True, slots=True)
class KeyValue:
    """The leader key as stored: its value, the revision that created it, its lease."""

    value: bytes
    create_revision: int
    lease: int


def candidate_value(candidate_id: str, addresses: tuple[str, ...]) -> bytes:
    return json.dumps({"id": candidate_id, "addresses": list(addresses)}).encode()


def term_of(kv: KeyValue) -> Term:
    """The term a leader key stands for; a value we cannot read still names a term."""
    try:
        data = json.loads(kv.value)
        leader_id = str(data["id"])
        addresses = tuple(str(a) for a in data.get("addresses", ()))
    except (ValueError, KeyError, TypeError, AttributeError):
        leader_id, addresses = kv.value.decode("utf-8", "replace"), ()
    return Term(leader_id=leader_id, epoch=kv.create_revision, addresses=addresses)


def grant_request(ttl_seconds: int) -> JSON:
    return {"TTL": str(ttl_seconds)}


def lease_id(response: JSON) -> int:
    return int(response["ID"])


def keepalive_request(lease: int) -> JSON:
    return {"ID": str(lease)}


def keepalive_ttl(response: JSON) -> int:
    """The TTL a keep-alive restored; 0 means the lease had already expired."""
    return int(response.get("result", response).get("TTL", 0))


def revoke_request(lease: int) -> JSON:
    return {"ID": str(lease)}


def range_request(key: str) -> JSON:
    return {"key": b64(key)}


def campaign_request(key: str, value: bytes, lease: int) -> JSON:
    """Create ``key`` with ``lease`` if it does not exist; otherwise read it."""
    return {
        "compare": [
            {"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
        ],
        "success": [{"request_put": {"key": b64(key), "value": b64(value), "lease": str(lease)}}],
        "failure": [{"request_range": {"key": b64(key)}}],
    }


def resign_request(key: str, create_revision: int) -> JSON:
    """Delete ``key`` only if it is still the one created at ``create_revision``."""
    return {
        "compare": [_same_term(key, create_revision)],
        "success": [{"request_delete_range": {"key": b64(key)}}],
    }


def _same_term(key: str, create_revision: int) -> JSON:
    return {
        "key": b64(key),
        "target": "CREATE",
        "result": "EQUAL",
        "create_revision": str(create_revision),
    }


def alone_request(leader_key: str, alone_key: str, epoch: int, lease: int, alone: bool) -> JSON:
    """While ``leader_key`` is still the term ``epoch``: put the mark that the term may
    acknowledge writes its followers lack (``alone_key``, on the term's lease, so it goes
    with the term), or delete it."""
    change: JSON = (
        {"request_put": {"key": b64(alone_key), "value": b64(str(epoch)), "lease": str(lease)}}
        if alone
        else {"request_delete_range": {"key": b64(alone_key)}}
    )
    return {"compare": [_same_term(leader_key, epoch)], "success": [change]}


def depose_request(leader_key: str, alone_key: str, epoch: int) -> JSON:
    """Delete ``leader_key`` if it is still the term ``epoch`` and no term holds the mark
    of acknowledging alone (a mark of an older term, on its lease, blocks until it lapses)."""
    return {
        "compare": [
            _same_term(leader_key, epoch),
            {"key": b64(alone_key), "target": "VERSION", "result": "EQUAL", "version": "0"},
        ],
        "success": [{"request_delete_range": {"key": b64(leader_key)}}],
    }


def watch_request(key: str, start_revision: int) -> JSON:
    return {"create_request": {"key": b64(key), "start_revision": str(start_revision)}}


def _key_value(raw: JSON) -> KeyValue:
    return KeyValue(
        value=unb64(raw.get("value", "")),
        create_revision=int(raw.get("create_revision", 0)),
        lease=int(raw.get("lease", 0)),
    )


def range_result(response: JSON) -> tuple[KeyValue | None, int]:
    """The key (None if absent) and the store's revision when it was read."""
    kvs = response.get("kvs") or []
    revision = int(response.get("header", {}).get("revision", 0))
    return (_key_value(kvs[0]) if kvs else None), revision


@dataclass(frozen=True, slots=True)
class CampaignResult:
    """Whether we created the key; the key as it now stands (ours or the holder's)."""

    won: bool
    holder: KeyValue | None
    revision: int


def campaign_result(response: JSON, value: bytes, lease: int) -> CampaignResult:
    revision = int(response.get("header", {}).get("revision", 0))
    if response.get("succeeded", False):
        # The put's revision is the key's create revision: the compare proved it absent.
        return CampaignResult(True, KeyValue(value, revision, lease), revision)
    for item in response.get("responses", []):
        found = item.get("response_range")
        if found is not None:
            holder, read_at = range_result(found)
            return CampaignResult(False, holder, read_at or revision)
    return CampaignResult(False, None, revision)


def txn_succeeded(response: JSON) -> bool:
    return bool(response.get("succeeded", False))


@dataclass(frozen=True, slots=True)
class WatchUpdate:
    """One watch message: whether the key was deleted, and the revision seen."""

    deleted: bool
    created: KeyValue | None
    revision: int
    canceled: bool


def watch_update(message: JSON) -> WatchUpdate:
    result = message.get("result", message)
    revision = int(result.get("header", {}).get("revision", 0))
    deleted, created = False, None
    for event in result.get("events", []):
        if event.get("type") == "DELETE":
            deleted, created = True, None
        else:
            created = _key_value(event.get("kv", {}))
            deleted = False
    canceled = bool(result.get("canceled", False)) or "error" in message
    return WatchUpdate(deleted, created, revision, canceled)
