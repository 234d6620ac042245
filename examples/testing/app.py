"""The shop's web API: a FastAPI app that queues an order's tasks and answers at once."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException
from tasks import FOLLOW_UP_DELAY, charge_card, follow_up

from fastworker.integration.fastapi import FastWorker

app = FastAPI()
fw = FastWorker(app)  # its client starts with the app and stops with it
Worker = Annotated[FastWorker, Depends(fw)]


@app.post("/orders/{order_id}", status_code=202)
async def order(order_id: int, cents: int, worker: Worker) -> dict[str, str]:
    charge = await worker.delay(charge_card, order_id, cents)
    await worker.delay(follow_up, order_id, countdown=FOLLOW_UP_DELAY)
    return {"charge": charge}


@app.get("/charges/{task_id}")
async def charge_status(task_id: str, worker: Worker) -> dict[str, Any]:
    result = await worker.status(task_id)
    if result is None:
        raise HTTPException(404, f"no charge {task_id}")
    return {"status": result.status, "receipt": result.result}
