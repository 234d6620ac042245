"""The bookshop's own tests: Flask's test client, with FASTWORKER_EAGER (tasks run inline
in the test, no control plane needed). Run them from this folder: ``uv run pytest``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bookshop import create_app, fw
from bookshop.tasks import price_total, send_receipt
from flask import Flask
from flask.testing import FlaskClient


@pytest.fixture
def app() -> Iterator[Flask]:
    app = create_app({"TESTING": True, "FASTWORKER_EAGER": True})
    yield app
    fw.close(app)  # ends eager mode: it is process-wide while it lasts


@pytest.fixture
def http(app: Flask) -> FlaskClient:
    return app.test_client()


def test_placing_an_order_sends_its_receipt_in_the_background(
    app: Flask, http: FlaskClient
) -> None:
    reply = http.post("/orders", json={"email": "ada@example.com", "prices": [12.5, 7.5]})

    assert reply.status_code == 202
    with app.app_context():
        assert fw.eager is not None
        [sent] = fw.eager.submitted(send_receipt)
    assert sent.task_id == reply.json["task_id"]
    assert sent.args == [reply.json["order_id"], "ada@example.com", 20.0]
    assert sent.result.result == f"receipt for order {sent.args[0]} (20.00) sent to ada@example.com"


def test_the_receipt_view_reads_the_tasks_result(http: FlaskClient) -> None:
    task_id = http.post("/orders", json={"email": "bo@example.com", "prices": [3]}).json["task_id"]

    reply = http.get(f"/orders/receipts/{task_id}")

    assert reply.status_code == 200
    assert reply.json["status"] == "success"
    assert reply.json["result"].endswith("(3.00) sent to bo@example.com")


def test_a_quote_is_queued_with_the_tasks_own_delay(app: Flask, http: FlaskClient) -> None:
    task_id = http.post("/quotes", json={"prices": [10, 20]}).json["task_id"]

    assert http.get(f"/tasks/{task_id}/result").json["result"] == 36.0
    with app.app_context():
        assert fw.eager is not None
        assert [s.task_id for s in fw.eager.submitted(price_total)] == [task_id]


def test_an_unknown_task_id_is_404(http: FlaskClient) -> None:
    assert http.get("/orders/receipts/no-such-task").status_code == 404
