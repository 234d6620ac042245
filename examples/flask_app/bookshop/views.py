"""The app's own views: each queues a task and answers with its id, or reads one."""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

from flask import Blueprint, abort, request
from flask.typing import ResponseReturnValue

from bookshop import fw
from bookshop.tasks import price_total, send_receipt
from fastworker import Timeout

orders = Blueprint("orders", __name__)
_order_ids = itertools.count(1)  # stands for the database's order ids


def _json() -> dict[str, Any]:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        abort(400, "send a JSON object")
    return body


@orders.post("/orders")
def place_order() -> ResponseReturnValue:
    body = _json()
    order_id = next(_order_ids)
    total = sum(body["prices"])
    task_id = fw.delay(send_receipt, order_id, body["email"], total)
    return {"order_id": order_id, "task_id": task_id}, 202


@orders.get("/orders/receipts/<task_id>")
def receipt(task_id: str) -> ResponseReturnValue:
    """200 once the task is final; 202 while it is not (after ``?wait=`` seconds)."""
    wait = min(request.args.get("wait", 0.0, type=float), 30.0)
    found = fw.status(task_id)
    if found is not None and not found.status.is_final and wait > 0:
        with contextlib.suppress(Timeout):
            found = fw.result(task_id, timeout=wait)
    if found is None:
        abort(404, f"task {task_id} is unknown or its result expired")
    status = 200 if found.status.is_final else 202
    return {"task_id": task_id, "status": found.status, "result": found.result}, status


@orders.post("/quotes")
def quote() -> ResponseReturnValue:
    return {"task_id": price_total.delay(_json()["prices"])}, 202
