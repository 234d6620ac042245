"""The Flask extension without a network: its settings, its per-process client (made on
first use, again after a fork or a change of test backend, a failed connection not retried
within ``RETRY_PAUSE``), the 503 for ``ControlPlaneUnavailable``, eager mode, and the
opt-in blueprint, all through Flask's test client with tasks run by ``eager()``."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask

import fastworker
from fastworker import ControlPlaneUnavailable, FastWorkerError, SyncClient, _default, task
from fastworker.integration import flask as extension
from fastworker.integration._flask_api import BadBody, submit_body
from fastworker.integration.flask import FastWorker, client_options, eager_setting
from fastworker.testing import eager
from fastworker_common import local

NOWHERE = "tcp://127.0.0.1:9"  # never dialled here: clients start under eager() or a stub


@task
def flask_unit_add(x: int, y: int) -> int:
    return x + y


@task
def flask_unit_fail() -> None:
    raise RuntimeError("boom")


def make_app(**config: Any) -> Flask:
    app = Flask("unit")
    app.config.update({"FASTWORKER_DISCOVERY_ADDRESS": NOWHERE, **config})
    return app


@pytest.fixture(autouse=True)
def default_client_kept() -> Iterator[None]:
    """``init_app`` configures the process's default client: as it was, after each test."""
    before = dict(_default._options)
    yield
    fastworker.configure(**before)


@pytest.fixture
def eager_app() -> Iterator[tuple[Flask, FastWorker]]:
    app = make_app(FASTWORKER_EAGER=True)
    fw = FastWorker(app)

    @app.post("/add")
    def add() -> dict[str, str]:
        return {"task_id": fw.delay(flask_unit_add, 2, 3)}

    yield app, fw
    fw.close()


# --- settings -------------------------------------------------------------------------


def test_config_keys_become_client_options_and_explicit_options_win() -> None:
    config = {
        "FASTWORKER_DISCOVERY_ADDRESS": "tcp://cp:5550",
        "FASTWORKER_ADDRESS": "tcp://cp:5555",
        "FASTWORKER_TIMEOUT": "12",
        "FASTWORKER_CONNECT_TIMEOUT": 0.5,
        "FASTWORKER_AUTH_TOKEN": "secret",
    }

    options = client_options(config, {"timeout": 3.0, "retries": 1})

    assert options == {
        "discovery_address": "tcp://cp:5550",
        "address": "tcp://cp:5555",
        "timeout": 3.0,
        "connect_timeout": 0.5,
        "auth_token": "secret",
        "retries": 1,
    }


def test_absent_or_none_keys_are_left_to_the_sdks_environment_defaults() -> None:
    assert client_options({"FASTWORKER_AUTH_TOKEN": None, "OTHER": 1}, {}) == {}


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"FASTWORKER_TIMEOUT": "soon"}, "FASTWORKER_TIMEOUT"),
        ({"FASTWORKER_CONNECT_TIMEOUT": [1]}, "FASTWORKER_CONNECT_TIMEOUT"),
        ({"FASTWORKER_DISCOVERY_ADDRESS": 5550}, "FASTWORKER_DISCOVERY_ADDRESS"),
    ],
)
def test_a_value_of_no_use_is_an_error_naming_its_key(config: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        client_options(config, {})


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), ("1", True), ("on", True), ("false", False), ("", False)],
)
def test_eager_is_a_bool_or_a_string_from_the_environment(value: object, expected: bool) -> None:
    assert eager_setting({"FASTWORKER_EAGER": value}) is expected


def test_eager_is_off_when_absent_and_an_error_when_unreadable() -> None:
    assert eager_setting({}) is False
    with pytest.raises(ValueError, match="FASTWORKER_EAGER"):
        eager_setting({"FASTWORKER_EAGER": "maybe"})


def test_bad_client_options_fail_at_init_app_not_at_the_first_request() -> None:
    with pytest.raises(ValueError, match="timeout must be positive"):
        FastWorker(make_app(FASTWORKER_TIMEOUT=0))


# --- registration and the 503 -----------------------------------------------------------


def test_init_app_registers_the_extension_and_connects_to_nothing() -> None:
    app = make_app()
    fw = FastWorker()

    fw.init_app(app)

    assert app.extensions["fastworker"] is fw
    assert fw._connections[app]._client is None


def test_control_plane_unavailable_in_a_view_is_503_with_retry_after() -> None:
    app = make_app()
    FastWorker(app)

    @app.get("/down")
    def down() -> str:
        raise ControlPlaneUnavailable("nobody at tcp://cp:5550")

    reply = app.test_client().get("/down")

    assert reply.status_code == 503
    assert reply.headers["Retry-After"] == "1"
    assert reply.json == {"detail": "nobody at tcp://cp:5550"}


def test_an_apps_own_handler_for_control_plane_unavailable_is_kept() -> None:
    app = make_app()
    app.register_error_handler(ControlPlaneUnavailable, lambda exc: ("later", 502))

    FastWorker(app)

    assert app.error_handler_spec[None][None][ControlPlaneUnavailable] is not extension._unavailable


def test_the_app_comes_from_the_context_or_else_from_the_constructor() -> None:
    bound, factory = make_app(), make_app()
    fw_bound, fw_factory = FastWorker(bound), FastWorker()
    fw_factory.init_app(factory)

    assert fw_bound._connection() is fw_bound._connections[bound]
    with pytest.raises(RuntimeError, match="app_context"):
        fw_factory._connection()
    with factory.app_context():
        assert fw_factory._connection() is fw_factory._connections[factory]
    with bound.app_context(), pytest.raises(RuntimeError, match="init_app was not called"):
        fw_factory._connection()


# --- the per-process client ---------------------------------------------------------------


def failing_start(calls: list[str]) -> Callable[[SyncClient], None]:
    """A ``SyncClient.start`` failing as with no control plane, noting each call."""

    def start(client: SyncClient) -> None:
        calls.append(client._settings.discovery_address)
        raise ControlPlaneUnavailable(f"nobody at {client._settings.discovery_address}")

    return start


def test_after_a_failed_connection_calls_fail_at_once_until_the_pause_has_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a connection whose first start failed
    calls: list[str] = []
    monkeypatch.setattr(SyncClient, "start", failing_start(calls))
    now = [100.0]
    connection = extension._Connection({"discovery_address": NOWHERE}, clock=lambda: now[0])
    with pytest.raises(ControlPlaneUnavailable, match="nobody at"):
        connection.client()
    # When it is used again within the pause, Then it fails without trying
    now[0] += extension.RETRY_PAUSE / 2
    with pytest.raises(ControlPlaneUnavailable, match="nobody at"):
        connection.client()
    assert calls == [NOWHERE]
    # And once the pause has passed it tries again
    now[0] += extension.RETRY_PAUSE
    with pytest.raises(ControlPlaneUnavailable):
        connection.client()
    assert calls == [NOWHERE, NOWHERE]
    connection.close()


def test_a_client_is_made_once_per_process_and_again_after_a_fork(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection = extension._Connection({"discovery_address": NOWHERE})
    with eager():
        first = connection.client()
        assert connection.client() is first
        closed: list[SyncClient] = []
        monkeypatch.setattr(SyncClient, "close", lambda self: closed.append(self))
        # When the process is a forked child of the one that made it
        pid = os.getpid()
        monkeypatch.setattr(os, "getpid", lambda: pid + 1)
        second = connection.client()
        # Then the child has its own, and the parent's is dropped, never closed here
        assert second is not first
        assert closed == []
        monkeypatch.undo()
        connection.close()


def test_a_child_forked_after_its_parent_connected_is_refused_not_aborted_by_nng(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a connection whose client connected over the network in this process
    monkeypatch.setattr(SyncClient, "start", lambda self: None)
    connection = extension._Connection({"discovery_address": NOWHERE})
    connection.client()
    # When it is used in a forked child, Then it says why it cannot be
    pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: pid + 1)
    with pytest.raises(FastWorkerError, match=f"forked from process {pid} after"):
        connection.client()
    # but in eager mode (no NNG) the child gets a client of its own
    with eager():
        assert connection.client() is not None
    monkeypatch.undo()
    connection.close()


def test_a_client_made_before_a_test_backend_came_is_replaced_when_it_comes() -> None:
    connection = extension._Connection({"discovery_address": NOWHERE})
    with eager():
        under_first = connection.client()
    with eager() as second:
        replaced = connection.client()
        assert replaced is not under_first
        assert replaced.delay(flask_unit_add, 1, 2) == second.submissions[0].task_id
    connection.close()


# --- eager mode -------------------------------------------------------------------------


def test_eager_runs_a_views_task_inline_and_records_it(
    eager_app: tuple[Flask, FastWorker],
) -> None:
    app, fw = eager_app

    reply = app.test_client().post("/add")

    assert reply.status_code == 200
    assert fw.eager is not None
    [ran] = fw.eager.submitted(flask_unit_add)
    assert ran.task_id == reply.get_json()["task_id"]
    assert (ran.args, ran.result.result) == ([2, 3], 5)
    assert fw.status(ran.task_id) == ran.result
    assert fw.result(ran.task_id, timeout=1).result == 5


def test_under_eager_a_tasks_exception_propagates_out_of_the_view(
    eager_app: tuple[Flask, FastWorker],
) -> None:
    app, fw = eager_app
    app.testing = True

    @app.post("/fail")
    def fail() -> dict[str, str]:
        return {"task_id": fw.delay(flask_unit_fail)}

    with pytest.raises(RuntimeError, match="boom"):
        app.test_client().post("/fail")


def test_close_ends_eager_mode_for_the_whole_process() -> None:
    app = make_app(FASTWORKER_EAGER="true")
    fw = FastWorker(app)
    assert local.installed() is fw.eager

    fw.close()

    assert local.installed() is None
    assert fw.eager is None


def test_delay_and_apply_async_take_the_clients_options(
    eager_app: tuple[Flask, FastWorker],
) -> None:
    _, fw = eager_app

    fw.delay("flask_unit_add", 1, y=2, priority="high")
    fw.apply_async(flask_unit_add, (3, 4), countdown=60, queue="slow")

    assert fw.eager is not None
    first, second = fw.eager.submissions
    assert (first.kwargs, first.priority) == ({"y": 2}, "high")
    assert (second.args, second.queue, second.result.result) == ([3, 4], "slow", 7)


# --- the blueprint ----------------------------------------------------------------------


def test_a_submission_body_is_checked() -> None:
    assert submit_body(None).args == []
    assert submit_body({"args": [1], "priority": "low"}).priority == "low"
    for bad in ({"args": "no"}, {"countdown": -1}, {"queue": "a b"}, {"other": 1}, [1]):
        with pytest.raises(BadBody):
            submit_body(bad)


def test_the_blueprint_submits_reads_and_cancels(eager_app: tuple[Flask, FastWorker]) -> None:
    app, fw = eager_app
    app.register_blueprint(fw.blueprint("/jobs"))
    http = app.test_client()

    submitted = http.post("/jobs/flask_unit_add", json={"args": [20, 22]})
    assert submitted.status_code == 202
    task_id = submitted.get_json()["task_id"]

    assert http.get(f"/jobs/{task_id}").get_json()["status"] == "success"
    result = http.get(f"/jobs/{task_id}/result", query_string={"wait": 5})
    assert (result.status_code, result.get_json()["result"]) == (200, 42)
    assert http.delete(f"/jobs/{task_id}").json == {"task_id": task_id, "cancelled": False}
    assert http.post("/jobs/flask_unit_add").status_code == 422  # no arguments


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("post", "/tasks/no_such_task", {}, 404),
        ("post", "/tasks/flask_unit_add", {"args": [1, 2, 3]}, 422),
        ("post", "/tasks/flask_unit_add", {"args": "1, 2"}, 422),
        ("post", "/tasks/flask_unit_add", {"args": [1, 2], "priority": "urgent"}, 422),
        ("get", "/tasks/" + "0" * 32, None, 404),
        ("get", "/tasks/" + "0" * 32 + "/result", None, 404),
        ("delete", "/tasks/" + "0" * 32, None, 404),
    ],
)
def test_the_blueprint_answers_errors_with_statuses(
    eager_app: tuple[Flask, FastWorker], method: str, path: str, body: object, status: int
) -> None:
    app, fw = eager_app
    app.register_blueprint(fw.blueprint())

    reply = getattr(app.test_client(), method)(path, json=body)

    assert reply.status_code == status
    assert "detail" in reply.json


def test_the_blueprint_answers_503_while_no_control_plane_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(SyncClient, "start", failing_start([]))
    app = make_app()
    fw = FastWorker(app)
    app.register_blueprint(fw.blueprint())

    reply = app.test_client().post("/tasks/flask_unit_add", json={"args": [1, 2]})

    assert reply.status_code == 503
    assert reply.headers["Retry-After"] == "1"
    fw.close()
