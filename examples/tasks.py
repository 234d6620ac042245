"""Example tasks: what `scripts/cluster` and the quickstart run."""

import asyncio
import time

from fastworker import task


@task
def add(x: float, y: float) -> float:
    return x + y


@task(priority="high")
async def multiply(x: float, y: float) -> float:
    return x * y


@task
async def sleep_for(seconds: float) -> float:
    """An I/O-bound task: waits without holding a thread."""
    await asyncio.sleep(seconds)
    return seconds


@task
def busy(seconds: float) -> float:
    """A blocking task: runs on a thread, never on the event loop."""
    time.sleep(seconds)
    return seconds


@task
def fail(message: str = "boom") -> None:
    raise ValueError(message)


@task(queue="reports")
async def build_report(rows: int) -> int:
    """A task of the "reports" queue: only subworkers serving that queue run it (in the
    compose cluster, the `subworker-reports` pool; a subworker without --queues serves
    every queue its tasks name)."""
    await asyncio.sleep(0.1)
    return rows
