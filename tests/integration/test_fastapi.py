"""``fastworker.integration.fastapi`` in a FastAPI app, through FastAPI's TestClient: the
client follows the app's lifespan, endpoints submit and read tasks, and the opt-in router
submits by name, answers status, results and cancels, maps errors to HTTP statuses, and
streams a task's states as server-sent events."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient
from harness import Cluster

from fastworker.integration.fastapi import FastWorker


def build_app(discovery: str, connect_timeout: float = 20) -> tuple[FastAPI, list[str]]:
    """An app with its own lifespan (which must still run), an endpoint, and the router."""
    lifespan_ran: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        lifespan_ran.append("started")
        yield
        lifespan_ran.append("stopped")

    app = FastAPI(lifespan=lifespan)
    fw = FastWorker(app, discovery, timeout=20, connect_timeout=connect_timeout)

    @app.post("/sum")
    async def add(
        x: int,
        y: int,
        worker: FastWorker = Depends(fw),  # noqa: B008 (annotations are strings here)
    ) -> dict[str, object]:
        task_id = await worker.delay("add", x, y)
        result = await worker.result(task_id, timeout=20)
        return {"task_id": task_id, "sum": result.result, "workers": worker.worker_count}

    @app.get("/ready")
    async def ready() -> dict[str, bool]:
        return {"connected": fw.connected}

    app.include_router(fw.router())
    return app, lifespan_ran


@pytest.fixture
def http(cluster: Cluster) -> Iterator[TestClient]:
    cluster.control_plane()
    app, _ = build_app(cluster.discovery)
    with TestClient(app) as client:
        yield client


def test_the_client_follows_the_apps_lifespan_and_endpoints_use_it(cluster: Cluster) -> None:
    cluster.control_plane()
    app, lifespan_ran = build_app(cluster.discovery)
    with TestClient(app) as http:
        reply = http.post("/sum", params={"x": 2, "y": 3})
        assert reply.status_code == 200
        assert reply.json()["sum"] == 5
        assert reply.json()["workers"] == 1  # the control plane's own worker
        assert lifespan_ran == ["started"]
    assert lifespan_ran == ["started", "stopped"]


def test_the_router_submits_by_name_and_returns_status_and_result(http: TestClient) -> None:
    submitted = http.post("/tasks/add", json={"args": [20, 22]})
    assert submitted.status_code == 202
    task_id = submitted.json()["task_id"]

    result = http.get(f"/tasks/{task_id}/result", params={"wait": 20})
    assert result.status_code == 200
    assert result.json()["status"] == "success"
    assert result.json()["result"] == 42
    assert http.get(f"/tasks/{task_id}").json()["status"] == "success"


def test_a_result_not_ready_yet_is_202_and_a_cancel_says_so(http: TestClient) -> None:
    task_id = http.post("/tasks/nap", json={"args": [30]}).json()["task_id"]
    pending = http.get(f"/tasks/{task_id}/result")
    assert pending.status_code == 202
    assert pending.json()["status"] in {"queued", "assigned", "running"}
    assert http.delete(f"/tasks/{task_id}").json() == {"task_id": task_id, "cancelled": True}
    assert http.get(f"/tasks/{task_id}").json()["status"] == "cancelled"


def test_errors_are_http_statuses(http: TestClient) -> None:
    assert http.post("/tasks/no_such_task", json={}).status_code == 404
    assert http.post("/tasks/add", json={"args": [1, 2, 3]}).status_code == 422
    assert http.post("/tasks/add", json={"args": "not a list"}).status_code == 422
    assert http.get("/tasks/" + "0" * 32).status_code == 404
    assert http.post("/tasks/add", json={"args": [1, 2], "priority": "urgent"}).status_code == 422


def test_the_event_stream_follows_a_task_to_its_end(http: TestClient) -> None:
    task_id = http.post("/tasks/nap", json={"args": [0.5]}).json()["task_id"]
    statuses = []
    with http.stream("GET", f"/tasks/{task_id}/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        for line in stream.iter_lines():
            if line.startswith("data: "):
                statuses.append(json.loads(line.removeprefix("data: "))["status"])
    assert statuses[-1] == "success"
    assert "running" in statuses
    assert len(statuses) == len(set(statuses))  # one event per change


def test_the_app_starts_without_a_control_plane_answers_503_then_connects_when_one_comes(
    cluster: Cluster,
) -> None:
    # Given an app whose control plane is not running
    app, lifespan_ran = build_app(cluster.discovery, connect_timeout=0.5)
    started = time.monotonic()
    with TestClient(app) as http:
        # Then its lifespan neither blocked nor raised
        assert time.monotonic() - started < 2
        assert lifespan_ran == ["started"]
        assert http.get("/ready").json() == {"connected": False}
        # and what needs the control plane is 503, from an endpoint or the router
        down = http.post("/sum", params={"x": 2, "y": 3})
        assert down.status_code == 503
        assert "control plane" in down.json()["detail"]
        assert http.post("/tasks/add", json={"args": [1, 2]}).status_code == 503
        # once an attempt to connect has failed, without waiting for another
        failing_fast = time.monotonic()
        assert http.post("/sum", params={"x": 2, "y": 3}).status_code == 503
        assert time.monotonic() - failing_fast < 0.5
        # When the control plane starts, the app connects to it in the background
        cluster.control_plane()
        deadline = time.monotonic() + 30
        while (reply := http.post("/sum", params={"x": 2, "y": 3})).status_code == 503:
            assert time.monotonic() < deadline, "the app never connected"
        assert reply.json()["sum"] == 5
        assert http.get("/ready").json() == {"connected": True}
    assert lifespan_ran == ["started", "stopped"]
