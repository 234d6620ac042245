"""Tasks the integration tests run in real control-plane and subworker processes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from decimal import Decimal
from pathlib import Path

import structlog

from fastworker import current_task, retry, task


@task
def add(x: float, y: float) -> float:
    return x + y


@task
async def echo(value: object) -> object:
    return value


@task
async def nap(seconds: float, tag: object = None) -> dict[str, object]:
    """Sleeps without a thread; reports which process ran it."""
    await asyncio.sleep(seconds)
    return {"pid": os.getpid(), "tag": tag, "finished": time.time()}


@task
def block(seconds: float) -> int:
    """Blocks its thread (a sync task) and reports its process."""
    time.sleep(seconds)
    return os.getpid()


@task
def explode(message: str) -> None:
    raise RuntimeError(message)


@task
def unsendable() -> object:
    return object()


@task
def text_of(size: int) -> str:
    return "x" * size


def _bump(path: str) -> int:
    """Count calls in a file, so a test can see how many times a task ran."""
    counter = Path(path)
    count = int(counter.read_text() or "0") + 1 if counter.exists() else 1
    counter.write_text(str(count))
    return count


@task(max_retries=3, retry_backoff=0.05)
def flaky(path: str, succeed_on: int) -> int:
    count = _bump(path)
    if count < succeed_on:
        raise RuntimeError(f"failure number {count}")
    return count


@task(max_retries=3, retry_backoff=0.01, retry_on=(KeyError,))
def picky(path: str) -> None:
    _bump(path)
    raise ValueError("not a KeyError, so not retried")


@task(time_limit=0.3)
async def overrun(seconds: float) -> str:
    """An async task with a timeout."""
    await asyncio.sleep(seconds)
    return "finished"


@task
def chatty(word: str) -> str:
    """Logs through the standard library and through structlog."""
    logging.getLogger("it_tasks").warning("stdlib says %s", word)
    structlog.get_logger("it_tasks").info("structlog says", word=word)
    return word


@task
async def mark(directory: str, index: int, seconds: float) -> int:
    """Takes ``seconds``, then leaves one file per run, so a test can count runs."""
    await asyncio.sleep(seconds)
    (Path(directory) / f"{index}.{uuid.uuid4().hex}").touch()
    return index


@task
def stamp(path: str, tag: int, seconds: float) -> int:
    """Appends "tag start-time" to a file as it starts, then blocks its thread."""
    with Path(path).open("a") as log:
        log.write(f"{tag} {time.time()}\n")
    time.sleep(seconds)
    return tag


@task(max_retries=3, retry_backoff=0.01, retry_on=(ConnectionError,))
def refused(path: str, succeed_on: int) -> int:
    """Fails with ConnectionRefusedError, a subclass of the ConnectionError it retries on."""
    count = _bump(path)
    if count < succeed_on:
        raise ConnectionRefusedError(f"refused, attempt {count}")
    return count


@task
def nested(depth: int) -> object:
    """A result ``depth`` arrays deep."""
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@task
def coerced(kind: str) -> object:
    """A value msgspec would coerce (to a list, a str), which the wire rule refuses."""
    return {"set": {1, 2}, "decimal": Decimal("1.10"), "uuid": uuid.UUID(int=5)}[kind]


@task(max_retries=3, retry_backoff=0.01)
def attempts_seen(path: str, succeed_on: int) -> str:
    """Notes what ``current_task()`` says on each attempt; fails until ``succeed_on``."""
    context = current_task()
    assert context is not None
    with Path(path).open("a") as seen:
        seen.write(f"{context.id} {context.attempt} {context.queue}\n")
    if context.attempt < succeed_on:
        raise RuntimeError(f"attempt {context.attempt} fails")
    return context.id


@task
def witness(path: str, number: int) -> int:
    """Appends its task id to ``path`` (one O_APPEND write, whole lines even when several
    processes share the file), so a test can see that each task's side effect happened
    and how many times; returns ``number + 1``."""
    context = current_task()
    assert context is not None
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, f"{context.id}\n".encode())
    finally:
        os.close(descriptor)
    return number + 1


@task
def tsum(values: list[float]) -> float:
    """Sums a list (a chord callback, or a DAG step fed all its parents)."""
    return sum(values)


@task
def tally(values: list[object], path: str) -> int:
    """A chord callback that counts its runs in ``path`` and keeps the last list it got
    (JSON) beside it, in ``path + ".values"``."""
    _bump(path)
    Path(path + ".values").write_text(json.dumps(values))
    return len(values)


@task
def note(value: object, path: str) -> None:
    """Appends what it was fed (a workflow id, a list of results) to ``path`` as JSON."""
    with Path(path).open("a") as out:
        out.write(json.dumps(value) + "\n")


@task
async def ident(index: int, seconds: float) -> int:
    """Returns ``index`` after ``seconds`` (a step that takes a little time)."""
    await asyncio.sleep(seconds)
    return index


@task
def fails_first(directory: str, index: int) -> int:
    """Fails the first time it runs for ``index`` (leaving a marker in ``directory``), and
    succeeds every time after: a dead letter whose retry works."""
    marker = Path(directory) / str(index)
    if not marker.exists():
        marker.write_text("failed once")
        raise LookupError(f"first run of {index}")
    return index


@task(max_retries=2)
def waits_to_retry(reason: str, countdown: float) -> None:
    """Asks for a retry after ``countdown`` seconds, for ``reason``, every time."""
    retry(reason, countdown=countdown)
