"""The HTTP API's operations on tasks (docs/http-api.md, "Failed tasks and cancelling"):
dead letters listed, shown, retried and purged, a task cancelled; every action noted in
the action log and sent on the event stream's ``actions``. On aiohttp's in-process test
server, behind the real token middleware, around a real engine and task board on a fake
clock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry
from view_world import NOW, add, dispatched, make_engine, submit

from fastworker_common.web import WebServer
from fastworker_control_plane.core.board import BoardConfig
from fastworker_control_plane.dashboard import actions, views
from fastworker_control_plane.dashboard.routes import DashboardRoutes
from fastworker_control_plane.engine import Engine
from fastworker_protocol import Outcome, TaskError, TaskSpec, TaskState

TOKEN = "test-token-for-the-operation-routes"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ACT = {**AUTH, actions.ACTION_HEADER: "1"}


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    engine = make_engine()
    yield engine
    engine.close()
    for _ in range(3):  # let a dispatch a route kicked run before the loop closes
        await asyncio.sleep(0)


@pytest.fixture
async def http(engine: Engine) -> AsyncIterator[TestClient[Any, Any]]:
    me = views.Identity(instance_id="cp-1", started_at=NOW)
    routes = DashboardRoutes(engine, me).routes()
    web = WebServer("127.0.0.1", 0, CollectorRegistry(), lambda: None, routes, auth=TOKEN)
    async with TestClient(TestServer(web.app)) as client:
        yield client


def fail(engine: Engine, task_id: str, error_type: str = "ValueError", *args: Any) -> None:
    """Run ``add(task_id)`` and have it fail for good (``add`` is never retried)."""
    submit(engine, TaskSpec(name="add", id=task_id, args=list(args) or [1]))
    assert dispatched(engine) == [task_id]
    error = TaskError(type=error_type, message=f"{task_id} broke", traceback="Traceback: boom")
    engine.board.report("w1", [], [Outcome(task_id=task_id, ok=False, error=error)], NOW + 1)


async def json_of(response: Any, status: int = 200) -> Any:
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    return await response.json()


def logged(engine: Engine) -> list[tuple[str, str, str]]:
    return [(a.kind, a.target, a.source) for a in engine.actions.since(0)]


# --- listing and showing dead letters ----------------------------------------------------------


async def test_get_failed_lists_the_dead_letters_with_their_errors(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    fail(engine, "a", "ValueError", 7)
    fail(engine, "b", "KeyError")

    document = await json_of(await http.get("/api/failed", headers=AUTH))

    assert [(d["task_id"], d["error"]["type"]) for d in document["tasks"]] == [
        ("b", "KeyError"),
        ("a", "ValueError"),
    ]
    assert (document["total"], document["stored"], document["more"]) == (2, 2, False)
    letter = document["tasks"][1]
    assert (letter["name"], letter["status"], letter["args"], letter["attempts"]) == (
        "add",
        "failure",
        [7],
        1,
    )
    assert letter["error"]["message"] == "a broke"
    assert letter["retry_of"] is None


async def test_get_failed_filters_by_task_name_error_type_and_time(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    fail(engine, "a", "ValueError")
    fail(engine, "b", "KeyError")

    async def ids(query: str) -> list[str]:
        document = await json_of(await http.get(f"/api/failed?{query}", headers=AUTH))
        return [d["task_id"] for d in document["tasks"]]

    assert await ids("error_type=KeyError") == ["b"]
    assert await ids("task_name=add&limit=1") == ["b"]
    assert await ids("task_name=other") == []
    assert await ids(f"since={NOW + 100}") == []
    assert await ids(f"until={NOW + 100}&error_type=") == ["b", "a"]


async def test_get_failed_with_a_bad_query_is_a_bad_request(http: TestClient[Any, Any]) -> None:
    for query in ("limit=0", "since=yesterday", "until=-3"):
        document = await json_of(await http.get(f"/api/failed?{query}", headers=AUTH), 400)
        assert document["error"] == "bad_request"


async def test_get_one_failed_task_shows_its_traceback_or_is_not_found(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    fail(engine, "a", "ValueError", 3)

    letter = await json_of(await http.get("/api/failed/a", headers=AUTH))
    missing = await json_of(await http.get("/api/failed/nope", headers=AUTH), 404)

    assert (letter["task_id"], letter["args"]) == ("a", [3])
    assert letter["error"]["traceback"] == "Traceback: boom"
    assert missing["error"] == "task_not_found"


# --- retrying and purging ------------------------------------------------------------------------


async def test_retry_runs_a_dead_letter_again_linked_to_it(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    fail(engine, "a", "ValueError", 5)

    body = {"task_ids": ["a"]}
    reply = await json_of(await http.post("/api/failed/retry", json=body, headers=ACT))

    [retried] = reply["retried"]
    assert (retried["task_id"], reply["missing"], reply["more"]) == ("a", [], False)
    new = engine.board.get(retried["new_task_id"], NOW + 1)
    assert new is not None
    assert (new.name, new.status, new.retry_of) == ("add", TaskState.QUEUED, "a")
    assert (await http.get("/api/failed/a", headers=AUTH)).status == 404  # out of the store
    assert ("failed.retry", "a", "http") in logged(engine)


async def test_retry_all_matching_retries_only_what_the_filters_select(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    fail(engine, "a", "ValueError")
    fail(engine, "b", "KeyError")
    fail(engine, "c", "KeyError")
    body = {"all_matching": True, "error_type": "KeyError"}

    reply = await json_of(await http.post("/api/failed/retry", json=body, headers=ACT))

    assert sorted(r["task_id"] for r in reply["retried"]) == ["b", "c"]
    left = await json_of(await http.get("/api/failed", headers=AUTH))
    assert [d["task_id"] for d in left["tasks"]] == ["a"]


async def test_all_matching_filters_that_match_nothing_act_on_nothing(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    fail(engine, "a")
    body = {"all_matching": True, "task_name": "other"}

    retried = await json_of(await http.post("/api/failed/retry", json=body, headers=ACT))
    purged = await json_of(await http.post("/api/failed/purge", json=body, headers=ACT))

    assert retried == {"retried": [], "missing": [], "more": False}
    assert purged == {"purged": 0, "missing": []}
    assert (await http.get("/api/failed/a", headers=AUTH)).status == 200
    assert logged(engine) == []


async def test_a_retry_the_board_cannot_queue_is_refused_whole_with_its_code() -> None:
    engine = make_engine(BoardConfig(max_queued=1))
    fail(engine, "a")
    fail(engine, "b")
    submit(engine, add("q1"))  # the normal lane is full now
    me = views.Identity(instance_id="cp-1", started_at=NOW)
    routes = DashboardRoutes(engine, me).routes()
    web = WebServer("127.0.0.1", 0, CollectorRegistry(), lambda: None, routes, auth=TOKEN)
    try:
        async with TestClient(TestServer(web.app)) as http:
            body = {"task_ids": ["a", "b"]}
            response = await http.post("/api/failed/retry", json=body, headers=ACT)

            assert (await json_of(response, 503))["error"] == "queue_full"
            listed = await json_of(await http.get("/api/failed", headers=AUTH))
            assert listed["stored"] == 2  # both stay
    finally:
        engine.close()


async def test_retry_names_the_ids_it_did_not_find(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    fail(engine, "a")

    body = {"task_ids": ["a", "gone"]}
    reply = await json_of(await http.post("/api/failed/retry", json=body, headers=ACT))

    assert [r["task_id"] for r in reply["retried"]] == ["a"]
    assert reply["missing"] == ["gone"]


async def test_purge_drops_the_selected_dead_letters(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    fail(engine, "a")
    fail(engine, "b")

    body = {"task_ids": ["a"]}
    reply = await json_of(await http.post("/api/failed/purge", json=body, headers=ACT))
    everything = {"all_matching": True}
    rest = await json_of(await http.post("/api/failed/purge", json=everything, headers=ACT))

    assert reply == {"purged": 1, "missing": []}
    assert rest == {"purged": 1, "missing": []}
    assert (await json_of(await http.get("/api/failed", headers=AUTH)))["stored"] == 0
    assert [kind for kind, _, _ in logged(engine)] == ["failed.purge", "failed.purge"]


@pytest.mark.parametrize("action", ["retry", "purge"])
@pytest.mark.parametrize(
    "body",
    [b"{}", b'{"task_ids": ["a"], "all_matching": true}', b'{"ids": ["a"]}', b"{not json"],
)
async def test_a_bad_selection_gets_400_invalid_message_and_changes_nothing(
    engine: Engine, http: TestClient[Any, Any], action: str, body: bytes
) -> None:
    fail(engine, "a")

    document = await json_of(await http.post(f"/api/failed/{action}", data=body, headers=ACT), 400)

    assert document["error"] == "invalid_message"
    assert (await http.get("/api/failed/a", headers=AUTH)).status == 200
    assert logged(engine) == []


# --- cancelling ----------------------------------------------------------------------------------


async def test_cancel_cancels_a_queued_task_once_and_notes_it(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    submit(engine, add("q1"))

    first = await json_of(await http.post("/api/tasks/q1/cancel", headers=ACT))
    again = await json_of(await http.post("/api/tasks/q1/cancel", headers=ACT))

    assert first == {"task_id": "q1", "status": "cancelled", "changed": True}
    assert again == {"task_id": "q1", "status": "cancelled", "changed": False}
    result = engine.board.get("q1", NOW)
    assert result is not None
    assert result.status == TaskState.CANCELLED
    assert logged(engine) == [("task.cancel", "q1", "http")]  # once: the second changed nothing


async def test_cancel_of_an_unknown_task_is_not_found(http: TestClient[Any, Any]) -> None:
    document = await json_of(await http.post("/api/tasks/nope/cancel", headers=ACT), 404)

    assert document["error"] == "task_not_found"


# --- what every action needs ---------------------------------------------------------------------

ACTIONS = [
    ("/api/tasks/q1/cancel", None),
    ("/api/failed/retry", b'{"task_ids": ["a"]}'),
    ("/api/failed/purge", b'{"task_ids": ["a"]}'),
]


@pytest.mark.parametrize(("path", "body"), ACTIONS)
async def test_an_action_needs_the_token_the_header_and_its_own_origin(
    engine: Engine, http: TestClient[Any, Any], path: str, body: bytes | None
) -> None:
    fail(engine, "a")
    submit(engine, add("q1"))  # queued: nothing dispatches it
    refused = [
        ({actions.ACTION_HEADER: "1"}, 401, "unauthorized"),
        (AUTH, 403, "forbidden"),
        ({**ACT, "Origin": "http://evil.example"}, 403, "forbidden"),
    ]
    for headers, status, error in refused:
        document = await json_of(await http.post(path, data=body, headers=headers), status)
        assert document["error"] == error

    assert logged(engine) == []
    queued = engine.board.get("q1", NOW)
    assert queued is not None
    assert queued.status == TaskState.QUEUED
    assert (await http.get("/api/failed/a", headers=AUTH)).status == 200
    own = {**ACT, "Origin": f"http://127.0.0.1:{http.port}"}
    assert (await http.post(path, data=body, headers=own)).status == 200


async def test_queue_and_limit_actions_are_noted_in_the_action_log(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    submit(engine, TaskSpec(name="add", id="r1", args=[1], queue="reports"))

    for path in ("/api/queues/reports/pause", "/api/queues/reports/resume"):
        assert (await http.post(path, headers=ACT)).status == 200
    assert (await http.post("/api/queues/reports/purge", headers=ACT)).status == 200
    limit = {"rate": "5/s", "concurrency": 2}
    assert (await http.post("/api/limits/task/add", json=limit, headers=ACT)).status == 200

    noted = engine.actions.since(0)
    assert [(a.kind, a.target, a.source) for a in noted] == [
        ("queue.pause", "reports", "http"),
        ("queue.resume", "reports", "http"),
        ("queue.purge", "reports", "http"),
        ("limit.set", "task:add", "http"),
    ]
    assert noted[2].detail == {"purged": 1}
    assert noted[3].detail == {"rate": "5/s", "concurrency": 2, "reset": False}


# --- the event stream and the log ---------------------------------------------------------------


async def events(response: Any) -> AsyncIterator[tuple[str, Any]]:
    kind = ""
    while True:
        line = (await response.content.readline()).decode().rstrip("\n")
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield kind, json.loads(line.removeprefix("data: "))


async def test_the_stream_sends_the_actions_taken_after_it_connected(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    submit(engine, add("q1"), add("q2"))
    engine.operations.acted("queue.pause", "before", "client")  # before the stream: not sent
    async with asyncio.timeout(10), http.get("/api/events", headers=AUTH) as response:
        stream = events(response)
        async for kind, _ in stream:
            if kind == "snapshot":  # the stream is reading the log now
                break

        await http.post("/api/tasks/q1/cancel", headers=ACT)
        engine.operations.acted("failed.retry", "", "client", count=3)
        sent: list[Any] = []
        async for kind, data in stream:
            if kind == "actions":
                sent += data
            if len(sent) >= 2:
                break

    assert [(a["seq"], a["kind"], a["target"], a["source"]) for a in sent] == [
        (2, "task.cancel", "q1", "http"),
        (3, "failed.retry", "", "client"),
    ]
    assert sent[0] == {**views.action(engine.actions.since(1)[0]), "at": NOW}
    assert sent[1]["detail"] == {"count": 3}


async def test_get_actions_lists_the_newest_actions_oldest_first(
    engine: Engine, http: TestClient[Any, Any]
) -> None:
    for queue in ("a", "b", "c"):
        engine.operations.acted("queue.pause", queue, "client")

    everything = await json_of(await http.get("/api/actions", headers=AUTH))
    newest = await json_of(await http.get("/api/actions?limit=2", headers=AUTH))

    assert [a["target"] for a in everything] == ["a", "b", "c"]
    assert [(a["seq"], a["target"]) for a in newest] == [(2, "b"), (3, "c")]
    assert (await http.get("/api/actions")).status == 401
