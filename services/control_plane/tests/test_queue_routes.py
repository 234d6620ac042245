"""The HTTP API's queue and limit routes (docs/http-api.md): what an action request must
carry to be obeyed (the token, the action header, its own origin), how its path and body
are parsed, and what it answers. The request checks are pure (``actions``); the routes run
on aiohttp's in-process test server, behind the real token middleware, around a real
engine and task board on a fake clock."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry
from view_world import ADD, NOW, FakeClock

from fastworker_common.web import WebServer
from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.entropy import counting
from fastworker_control_plane.core.limits import Scope
from fastworker_control_plane.core.queue_controls import set_limit
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.dashboard import actions, views
from fastworker_control_plane.dashboard.routes import DashboardRoutes
from fastworker_control_plane.engine import Engine
from fastworker_protocol import ErrorCode, Priority, TaskSpec, TaskState

TOKEN = "test-token-for-the-queue-routes"
ACT = {actions.ACTION_HEADER: "1"}
AUTH = {"Authorization": f"Bearer {TOKEN}"}


# --- the action checks, without HTTP ------------------------------------------------------------


def test_an_action_with_the_header_and_no_origin_passes() -> None:
    actions.check_origin({"X-FastWorker-Action": "1"}, "127.0.0.1:8080")


@pytest.mark.parametrize("headers", [{}, {"X-FastWorker-Action": "0"}, {"X-FastWorker": "1"}])
def test_an_action_without_the_action_header_is_forbidden(headers: dict[str, str]) -> None:
    with pytest.raises(actions.ForbiddenAction, match="X-FastWorker-Action: 1"):
        actions.check_origin(headers, "127.0.0.1:8080")


@pytest.mark.parametrize(
    ("origin", "host"),
    [
        ("http://127.0.0.1:8080", "127.0.0.1:8080"),
        ("http://LocalHost:8080", "localhost:8080"),
        ("https://fw.example.com", "fw.example.com"),
        ("https://fw.example.com", "fw.example.com:443"),
        ("http://fw.example.com", "fw.example.com:80"),
    ],
)
def test_an_action_from_its_own_origin_passes(origin: str, host: str) -> None:
    actions.check_origin({**ACT, "Origin": origin}, host)


@pytest.mark.parametrize(
    ("origin", "host"),
    [
        ("http://evil.example", "127.0.0.1:8080"),
        ("http://127.0.0.1:9999", "127.0.0.1:8080"),
        ("https://127.0.0.1:8080", "127.0.0.1"),  # another port, by default
        ("http://127.0.0.1.evil.example:8080", "127.0.0.1:8080"),
        ("null", "127.0.0.1:8080"),  # a sandboxed frame, a file: page
        ("file://", "127.0.0.1:8080"),
        ("", "127.0.0.1:8080"),
        ("http://127.0.0.1:8080/path", "127.0.0.1:8080"),  # not an origin
        ("http://[::1", "127.0.0.1:8080"),  # not even a URL
    ],
)
def test_an_action_from_another_origin_is_forbidden(origin: str, host: str) -> None:
    with pytest.raises(actions.ForbiddenAction, match="may not act"):
        actions.check_origin({**ACT, "Origin": origin}, host)


def test_a_limit_change_is_parsed_from_its_scope_name_and_json_body() -> None:
    change = actions.limit_change("queue", "reports", b'{"rate": "100/s", "concurrency": 4}')

    assert change == actions.LimitChange(Scope.QUEUE, "reports", "100/s", 4, False)
    assert actions.limit_change("task", "add", b'{"rate": "off", "reset": true}') == (
        actions.LimitChange(Scope.TASK, "add", "off", None, True)
    )
    assert actions.limit_change("task", "add", b"  ") == (
        actions.LimitChange(Scope.TASK, "add", None, None, False)
    )


@pytest.mark.parametrize(
    ("scope", "name", "body", "says"),
    [
        ("worker", "w1", b"{}", "scope must be 'queue' or 'task'"),
        ("queue", "bad name!", b"{}", "bad queue name"),
        ("queue", "q" * 129, b"{}", "bad queue name"),
        ("queue", "reports", b'{"rate": "fast"}', "rate"),
        ("queue", "reports", b'{"rate": 100}', "Expected `str | null`"),
        ("queue", "reports", b'{"concurrency": -1}', "Expected `int` >= 0"),
        ("queue", "reports", b'{"concurrency": "4"}', "Expected `int | null`"),
        ("queue", "reports", b'{"reset": "yes"}', "Expected `bool`"),
        ("queue", "reports", b'{"burst": 4}', "unknown field `burst`"),
        ("queue", "reports", b"[1, 2]", "Expected `object`"),
        ("queue", "reports", b"{not json", "bad limit body"),
    ],
)
def test_a_bad_limit_change_is_refused_saying_why(
    scope: str, name: str, body: bytes, says: str
) -> None:
    with pytest.raises(actions.BadAction, match=re.escape(says)):
        actions.limit_change(scope, name, body)


def test_a_queue_name_is_checked_against_the_protocols_rule() -> None:
    assert actions.queue_name("reports.v2-eu_1") == "reports.v2-eu_1"
    with pytest.raises(actions.BadAction, match="bad queue name"):
        actions.queue_name("a/b")


# --- the routes --------------------------------------------------------------------------------


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    board = TaskBoard()
    board.register("w1", "host-w1", 4, [ADD], NOW)
    engine = Engine(
        board,
        heartbeat_timeout=10.0,
        clock=FakeClock(),
        entropy=counting(lambda low, high: high),
    )
    yield engine
    engine.close()
    for _ in range(3):  # let a dispatch a route kicked run before the loop closes
        await asyncio.sleep(0)


@pytest.fixture
async def http(engine: Engine) -> AsyncIterator[TestClient[Any, Any]]:
    """The control plane's HTTP app as it serves it: dashboard routes behind the token."""
    me = views.Identity(instance_id="cp-1", started_at=NOW)
    web = WebServer(
        "127.0.0.1",
        0,
        CollectorRegistry(),
        lambda: None,
        DashboardRoutes(engine, me).routes(),
        auth=TOKEN,
    )
    async with TestClient(TestServer(web.app)) as client:
        yield client


def queue_reports(engine: Engine, *task_ids: str) -> None:
    specs = [TaskSpec(name="add", id=t, args=[1], queue="reports") for t in task_ids]
    engine.board.submit(specs, Priority.NORMAL, NOW)


async def json_of(response: Any) -> Any:
    assert response.content_type == "application/json"
    return await response.json()


async def test_get_queues_lists_the_named_queues(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    queue_reports(engine, "r1", "r2")

    response = await http.get("/api/queues", headers=AUTH)

    assert response.status == 200
    document = await json_of(response)
    assert document == views.queues(engine, NOW)
    assert [(q["name"], q["depth"]["normal"]) for q in document] == [
        ("default", 0),
        ("reports", 2),
    ]


async def test_pause_and_resume_change_the_queue_and_answer_its_state(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    queue_reports(engine, "r1")

    paused = await http.post("/api/queues/reports/pause", headers={**AUTH, **ACT})

    assert (paused.status, await json_of(paused)) == (
        200,
        {"queue": "reports", "paused": True, "purged": 0},
    )
    assert "reports" in engine.board.queues.paused
    resumed = await http.post("/api/queues/reports/resume", headers={**AUTH, **ACT})
    assert await json_of(resumed) == {"queue": "reports", "paused": False, "purged": 0}
    assert "reports" not in engine.board.queues.paused


async def test_purge_cancels_the_queued_tasks_and_counts_them(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    queue_reports(engine, "r1", "r2", "r3")

    response = await http.post("/api/queues/reports/purge", headers={**AUTH, **ACT})

    assert await json_of(response) == {"queue": "reports", "paused": False, "purged": 3}
    states = [engine.board.get(t, NOW) for t in ("r1", "r2", "r3")]
    assert [r.status for r in states if r is not None] == [TaskState.CANCELLED] * 3


async def test_set_limit_changes_a_limit_and_answers_the_limits_now(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    response = await http.post(
        "/api/limits/queue/reports",
        json={"rate": "100/s", "concurrency": 4, "reset": False},
        headers={**AUTH, **ACT},
    )

    assert response.status == 200
    document = await json_of(response)
    assert document == views.limits(engine, NOW)
    assert [(x["scope"], x["name"], x["rate_limit"], x["concurrency_limit"]) for x in document] == [
        ("queue", "reports", "100/s", 4)
    ]
    listed = await http.get("/api/limits", headers=AUTH)
    assert await json_of(listed) == document
    queues = {q["name"]: q for q in views.queues(engine, NOW)}
    assert (queues["reports"]["rate_limit"], queues["reports"]["concurrency_limit"]) == ("100/s", 4)


async def test_a_limit_is_lifted_with_off_and_zero(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    set_limit(engine.board, Scope.TASK, "add", "5/s", 2)

    response = await http.post(
        "/api/limits/task/add", json={"rate": "off", "concurrency": 0}, headers={**AUTH, **ACT}
    )

    assert await json_of(response) == []


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/queues/bad%20name/pause", None),
        ("/api/queues/" + "q" * 129 + "/purge", None),
        ("/api/limits/worker/w1", b"{}"),
        ("/api/limits/queue/bad%21name", b"{}"),
        ("/api/limits/queue/reports", b'{"rate": "a lot"}'),
        ("/api/limits/queue/reports", b'{"concurrency": -2}'),
        ("/api/limits/queue/reports", b"{not json"),
    ],
)
async def test_bad_input_gets_400_invalid_message_and_changes_nothing(
    engine: Engine, http: TestClient[Any, Any], path: str, body: bytes | None
) -> None:
    response = await http.post(path, data=body, headers={**AUTH, **ACT})

    assert response.status == 400
    document = await json_of(response)
    assert document["error"] == "invalid_message"
    assert document["message"]
    assert not engine.board.queues.paused
    assert views.limits(engine, NOW) == []


async def test_an_action_without_the_token_is_unauthorized_and_changes_nothing(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    for path in ("/api/queues/reports/pause", "/api/limits/queue/reports"):
        response = await http.post(path, json={"concurrency": 1}, headers=ACT)

        assert response.status == 401
        assert (await json_of(response))["error"] == "unauthorized"
    assert (await http.get("/api/queues")).status == 401
    assert not engine.board.queues.paused
    assert views.limits(engine, NOW) == []


async def test_an_action_without_the_header_or_from_another_origin_is_forbidden(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    refused = [
        ("/api/queues/reports/pause", AUTH),
        ("/api/queues/reports/purge", {**AUTH, "Origin": "http://evil.example"}),
        ("/api/limits/queue/reports", {**AUTH, **ACT, "Origin": "http://evil.example"}),
        ("/api/limits/queue/reports", {**AUTH, "Content-Type": "text/plain"}),
    ]
    queue_reports(engine, "r1")
    for path, headers in refused:
        response = await http.post(path, data=b'{"concurrency": 1}', headers=headers)

        assert response.status == 403, path
        assert (await json_of(response))["error"] == "forbidden"
    assert not engine.board.queues.paused
    assert views.limits(engine, NOW) == []
    assert len(engine.board.queues) == 1  # not purged


async def test_an_action_from_the_pages_own_origin_is_obeyed(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    origin = f"http://127.0.0.1:{http.port}"

    response = await http.post(
        "/api/queues/reports/pause", headers={**AUTH, **ACT, "Origin": origin}
    )

    assert response.status == 200
    assert "reports" in engine.board.queues.paused


async def test_an_unknown_action_or_a_get_is_not_an_action(http: TestClient[Any, Any]) -> None:
    assert (await http.post("/api/queues/reports/drop", headers={**AUTH, **ACT})).status == 404
    assert (await http.get("/api/queues/reports/pause", headers=AUTH)).status == 405


async def test_a_journal_that_cannot_be_written_is_an_internal_error(
    engine: Engine, http: TestClient[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken() -> None:
        raise Rejected(ErrorCode.INTERNAL, "journal cannot be written (in memory only)")

    monkeypatch.setattr(engine.outbox, "durable", broken)

    response = await http.post("/api/queues/reports/pause", headers={**AUTH, **ACT})

    assert response.status == 500
    assert await json_of(response) == {
        "error": "internal",
        "message": "journal cannot be written (in memory only)",
    }
