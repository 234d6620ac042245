"""What the HTTP API's action requests (pause, resume, purge a queue; change a limit;
cancel a task; retry or purge dead letters) must carry, and what they mean: checked and
parsed here, without I/O, so that the routes only call the engine.

An action changes the cluster, so a browser must never be tricked into sending one. The
token cookie is ``SameSite=Strict``, and on top of it every action needs the header
``X-FastWorker-Action: 1``: a cross-site form or "simple" request cannot set a custom header,
and a script on another site can only do so after a CORS preflight, which this server never
grants. An ``Origin`` header, when the browser sends one, must name this very server.
This module never touches the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

import msgspec
from yarl import URL

from fastworker_control_plane.core.limits import Scope
from fastworker_protocol import check_queue, check_rate
from fastworker_protocol.limits import UnixTime
from fastworker_protocol.operations import MAX_FAILED_ACTED, MAX_FAILED_LISTED, FailedFilter
from fastworker_protocol.queues import ConcurrencySetting

ACTION_HEADER = "X-FastWorker-Action"
OFF = "off"
_DEFAULT_PORTS = {"http": 80, "https": 443}


class BadAction(ValueError):
    """The request is malformed: answered ``400 invalid_message``."""


class ForbiddenAction(ValueError):
    """The request may come from another site: answered ``403 forbidden``."""


class LimitBody(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /api/limits/{scope}/{name}``: ``None`` leaves a limit as it is."""

    rate: str | None = None
    concurrency: ConcurrencySetting | None = None
    reset: bool = False


@dataclass(frozen=True)
class LimitChange:
    scope: Scope
    name: str
    rate: str | None
    concurrency: int | None
    reset: bool


class FailedBody(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /api/failed/retry`` and ``/api/failed/purge``: explicit
    ``task_ids``, or ``all_matching`` with the filters (none: every dead letter)."""

    task_ids: Annotated[list[str], msgspec.Meta(max_length=MAX_FAILED_ACTED)] = []
    all_matching: bool = False
    task_name: str | None = None
    error_type: str | None = None
    since: UnixTime | None = None
    until: UnixTime | None = None


@dataclass(frozen=True)
class FailedSelection:
    """Which dead letters a retry or purge acts on, as the engine takes them."""

    filter: FailedFilter
    all_matching: bool


@dataclass(frozen=True)
class FailedQuery:
    """``GET /api/failed``'s query: the filters, and how many to list."""

    filter: FailedFilter
    limit: int


DEFAULT_FAILED_LISTED = 100
_limit_body = msgspec.json.Decoder(LimitBody)
_failed_body = msgspec.json.Decoder(FailedBody)


def check_origin(headers: Mapping[str, str], host: str) -> None:
    """Refuse (``ForbiddenAction``) an action without the action header, or whose
    ``Origin`` is another site than ``host`` (the request's ``Host``)."""
    if headers.get(ACTION_HEADER) != "1":
        raise ForbiddenAction(f"an action needs the header '{ACTION_HEADER}: 1'")
    origin = headers.get("Origin")
    if origin is not None and not _same_site(origin, host):
        raise ForbiddenAction(f"origin {origin!r} may not act on {host!r}")


def _same_site(origin: str, host: str) -> bool:
    try:
        asked = URL(origin)
        scheme = asked.scheme.lower()
        if scheme not in _DEFAULT_PORTS or asked.host is None or asked.path not in ("", "/"):
            return False  # "null" (a sandboxed frame, a file), or not an origin at all
        here = URL.build(scheme=scheme, authority=host)
    except ValueError:
        return False
    same_host = asked.host.lower() == (here.host or "").lower()
    return same_host and _port(asked, scheme) == _port(here, scheme)


def _port(url: URL, scheme: str) -> int:
    return url.explicit_port or _DEFAULT_PORTS[scheme]


def queue_name(raw: str) -> str:
    try:
        return check_queue(raw)
    except ValueError as exc:
        raise BadAction(str(exc)) from None


def limit_change(scope: str, name: str, body: bytes) -> LimitChange:
    """The change a limit request asks for (an empty body changes nothing)."""
    try:
        checked_scope = Scope(scope)
    except ValueError:
        raise BadAction(f"scope must be 'queue' or 'task', not {scope!r}") from None
    if checked_scope == Scope.QUEUE:
        queue_name(name)
    try:
        parsed = _limit_body.decode(body) if body.strip() else LimitBody()
    except msgspec.DecodeError as exc:  # bad JSON, or a field of the wrong type or range
        raise BadAction(f"bad limit body: {exc}") from None
    if parsed.rate is not None and parsed.rate != OFF:
        try:
            check_rate(parsed.rate)
        except ValueError as exc:
            raise BadAction(str(exc)) from None
    return LimitChange(checked_scope, name, parsed.rate, parsed.concurrency, parsed.reset)


def failed_selection(body: bytes) -> FailedSelection:
    """The dead letters a retry or purge body selects. Exactly one of ``task_ids`` and
    ``all_matching``: an empty body must never mean "all of them", and ids with
    ``all_matching`` would leave the reader guessing which one wins."""
    try:
        parsed = _failed_body.decode(body)
    except msgspec.DecodeError as exc:  # bad JSON, an unknown field, a wrong type or range
        raise BadAction(f"bad selection: {exc}") from None
    if parsed.all_matching and parsed.task_ids:
        raise BadAction("give either task_ids or all_matching, not both")
    if not parsed.all_matching and not parsed.task_ids:
        raise BadAction("select dead letters: give task_ids, or all_matching (with filters)")
    if not all(parsed.task_ids):
        raise BadAction("a task id cannot be empty")
    selected = FailedFilter(
        task_ids=list(dict.fromkeys(parsed.task_ids)),  # once each, in the order given
        task_name=parsed.task_name or None,
        error_type=parsed.error_type or None,
        since=parsed.since,
        until=parsed.until,
    )
    return FailedSelection(selected, parsed.all_matching)


def failed_query(query: Mapping[str, str]) -> FailedQuery:
    """The filters of a dead-letter listing; empty values are no filter. Not an action
    (nothing changes), but parsed here beside the bodies that select the same way."""
    limit = query.get("limit") or str(DEFAULT_FAILED_LISTED)
    if not limit.isdigit() or not 1 <= int(limit) <= MAX_FAILED_LISTED:
        raise BadAction(f"limit must be an integer from 1 to {MAX_FAILED_LISTED}, not {limit!r}")
    selected = FailedFilter(
        task_name=query.get("task_name") or None,
        error_type=query.get("error_type") or None,
        since=_time(query, "since"),
        until=_time(query, "until"),
    )
    return FailedQuery(selected, int(limit))


def _time(query: Mapping[str, str], name: str) -> float | None:
    raw = query.get(name)
    if not raw:
        return None
    try:
        return msgspec.convert(float(raw), UnixTime)
    except (ValueError, msgspec.ValidationError):
        raise BadAction(f"{name} must be Unix seconds, not {raw!r}") from None
