"""Tasks the integration tests run in real control-plane and subworker processes."""

from __future__ import annotations

import asyncio
import os
import time

from fastworker import task


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
