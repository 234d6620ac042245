"""A FastAPI app that hands slow work to FastWorker. See README.md for how to run it.

- ``POST /signup?email=...`` queues ``send_welcome_email`` and answers at once (202);
- ``GET /signup/{task_id}`` reads that task's result (``?wait=`` seconds to wait for it);
- ``/tasks/...`` is FastWorker's ready-made router (submit any task by name, status,
  result, cancel, server-sent events): mount it behind your own authentication;
- ``GET /health`` says how many workers the control plane has.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Response
from tasks import send_welcome_email

from fastworker import TaskNotFound, Timeout
from fastworker.integration.fastapi import FastWorker

app = FastAPI(title="FastWorker example")
# The client starts and stops with the app (each Uvicorn worker process has its own), and
# finds the control plane at FASTWORKER_DISCOVERY_ADDRESS (default tcp://127.0.0.1:5550).
fw = FastWorker(app, timeout=10)
app.include_router(fw.router())

Worker = Annotated[FastWorker, Depends(fw)]


@app.post("/signup", status_code=202)
async def signup(email: str, worker: Worker) -> dict[str, str]:
    task_id = await worker.delay(send_welcome_email, email)
    return {"task_id": task_id}


@app.get("/signup/{task_id}")
async def signup_result(
    task_id: str, response: Response, worker: Worker, wait: float = 10.0
) -> dict[str, Any]:
    """200 with the result once the task is final; 202 if it is not after ``wait`` s."""
    try:
        result = await worker.result(task_id, timeout=min(max(wait, 0.0), 30.0))
    except TaskNotFound:
        raise HTTPException(404, f"task {task_id} is unknown or its result expired") from None
    except Timeout:
        response.status_code = 202
        return {"task_id": task_id, "status": "pending"}
    return {"task_id": task_id, "status": result.status, "result": result.result}


@app.get("/health")
async def health() -> dict[str, Any]:
    return {"status": "ok", "worker_count": fw.worker_count}
