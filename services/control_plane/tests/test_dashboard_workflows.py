"""``GET /api/workflows/{id}`` (docs/http-api.md): a workflow's state and its steps as a
graph, for the dashboard's workflow view; the document built from a ``WorkflowInfo``
(pure), and the route behind the token on aiohttp's in-process test server, over an
engine that accepted a real ``SubmitWorkflow``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry
from view_world import ME, is_json, make_engine

from fastworker_common.web import WebServer
from fastworker_control_plane.dashboard import views
from fastworker_control_plane.dashboard.routes import DashboardRoutes
from fastworker_control_plane.engine import Engine
from fastworker_protocol import TaskSpec
from fastworker_protocol.workflows import (
    Feed,
    StepInfo,
    StepState,
    SubmitWorkflow,
    WorkflowInfo,
    WorkflowState,
    WorkflowStep,
)

TOKEN = "test-token-for-the-workflow-routes"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def step(*after: int) -> WorkflowStep:
    feed = Feed.NONE if not after else Feed.ALL if len(after) > 1 else Feed.ONE
    args = [] if after else [1]  # add(x): a step with parents is fed x
    return WorkflowStep(task=TaskSpec(id="", name="add", args=args), after=list(after), feed=feed)


# --- the document, pure ---------------------------------------------------------------------


def test_a_workflow_document_lists_each_step_with_its_index_state_and_parents() -> None:
    # Given a diamond whose first step succeeded and whose middle ones run or wait
    info = WorkflowInfo(
        workflow_id="wf",
        state=WorkflowState.RUNNING,
        steps=[
            StepInfo(task_id="wf.0", name="a", state=StepState.SUCCESS),
            StepInfo(task_id="wf.1", name="b", state=StepState.RUNNING, after=[0]),
            StepInfo(task_id="wf.2", name="c", state=StepState.QUEUED, after=[0]),
            StepInfo(task_id="wf.3", name="d", state=StepState.WAITING, after=[1, 2]),
        ],
        submitted_at=990.0,
    )

    # When its document is built
    document = views.workflow(info)

    # Then it is plain JSON naming the workflow and each step, edges by index
    assert is_json(document)
    assert document["workflow_id"] == "wf"
    assert document["state"] == "running"
    assert document["on_failure"] == "cancel"
    assert (document["submitted_at"], document["finished_at"]) == (990.0, None)
    assert document["steps"][3] == {
        "index": 3,
        "task_id": "wf.3",
        "name": "d",
        "state": "waiting",
        "after": [1, 2],
    }
    assert [s["state"] for s in document["steps"]] == ["success", "running", "queued", "waiting"]


# --- the route ------------------------------------------------------------------------------


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    engine = make_engine()
    yield engine
    engine.close()


def serve(engine: Engine) -> TestClient[Any, Any]:
    web = WebServer(
        "127.0.0.1",
        0,
        CollectorRegistry(),
        lambda: None,
        DashboardRoutes(engine, ME).routes(),
        auth=TOKEN,
    )
    return TestClient(TestServer(web.app))


async def test_get_workflow_answers_its_steps_as_a_graph_and_needs_the_token(
    engine: Engine,
) -> None:
    # Given a chain of two then a step after both, accepted by the engine
    message = SubmitWorkflow(workflow_id="wf-7", steps=[step(), step(0), step(0, 1)])
    engine.workflows.submit(message)

    async with serve(engine) as http:
        # When it is asked for without the token, then with it
        refused = await http.get("/api/workflows/wf-7")
        answered = await http.get("/api/workflows/wf-7", headers=AUTH)

        # Then only the second is answered, with the steps' states and edges
        assert refused.status == 401
        assert answered.status == 200
        assert answered.content_type == "application/json"
        document = await answered.json()
    assert document == views.workflow(engine.workflows.info("wf-7"))
    assert [s["task_id"] for s in document["steps"]] == ["wf-7.0", "wf-7.1", "wf-7.2"]
    assert [s["after"] for s in document["steps"]] == [[], [0], [0, 1]]
    assert [s["state"] for s in document["steps"]] == ["queued", "waiting", "waiting"]
    assert document["state"] == "running"


async def test_an_unknown_workflow_is_404_task_not_found(engine: Engine) -> None:
    async with serve(engine) as http:
        answer = await http.get("/api/workflows/nope", headers=AUTH)
        assert answer.status == 404
        document = await answer.json()
    assert document["error"] == "task_not_found"
    assert "nope" in document["message"]
