"""Tasks with signal handlers, for tests/integration/test_signals.py: every handler appends
one JSON line to the file named by ``IT_SIGNALS_LOG`` (O_APPEND: lines from several
processes never interleave). Each task returns where it ran, for the test to compare with
where its handlers ran. The worker-level handlers are in ``it_signal_handlers``, a module
with no process task: a process pool's child must import it by itself."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any

from fastworker import current_task, signals, task


def record(signal: str, **fields: Any) -> None:
    context = current_task()
    line = {
        "signal": signal,
        "pid": os.getpid(),
        "thread": threading.current_thread().name,
        "context": context.id if context is not None else None,
        **fields,
    }
    with open(os.environ["IT_SIGNALS_LOG"], "a") as log:
        log.write(json.dumps(line) + "\n")


def where() -> list[Any]:
    return [os.getpid(), threading.current_thread().name]


@task(name="sig_add")
def sig_add(x: int, y: int) -> list[Any]:
    return where()


@task(name="sig_async_add")
async def sig_async_add(x: int, y: int) -> list[Any]:
    await asyncio.sleep(0)
    return where()


@task(name="sig_process_add", pool="process")
def sig_process_add(x: int, y: int) -> list[Any]:
    return where()


@task(name="sig_fail", max_retries=1, retry_backoff=0.05)
def sig_fail(reason: str) -> None:
    raise ValueError(reason)


@signals.task_prerun
def on_prerun(run: signals.TaskRun) -> None:
    record("prerun", id=run.id, name=run.name, attempt=run.attempt, args=list(run.args))


@signals.task_prerun
def broken_handler(run: signals.TaskRun) -> None:
    raise RuntimeError("a bug in a handler must not fail the task")


@signals.task_failure
def on_failure(failure: signals.TaskFailure) -> None:
    record(
        "failure",
        id=failure.task.id,
        attempt=failure.task.attempt,
        exception=type(failure.exception).__name__,
        message=failure.error.message,
        retryable=failure.retryable,
    )


@signals.task_postrun
def on_postrun(end: signals.TaskFinished) -> None:
    record("postrun", id=end.task.id, attempt=end.task.attempt, state=str(end.state))


@signals.task_postrun
async def on_postrun_async(end: signals.TaskFinished) -> None:
    await asyncio.sleep(0)
    record("postrun async", id=end.task.id, state=str(end.state))
