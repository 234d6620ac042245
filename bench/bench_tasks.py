"""The tasks the benchmark runs. Control planes and subworkers import this module as
``bench_tasks`` (the benchmark puts ``bench/`` on their PYTHONPATH)."""

from __future__ import annotations

import asyncio
import os

from fastworker import task


@task
def add(x: int, y: int) -> int:
    """CPU-trivial and sync: measures the queue, not the task (runs on a worker thread)."""
    return x + y


@task
async def io_sleep(seconds: float) -> float:
    """I/O-bound: waits without holding a thread, so concurrency is the only limit."""
    await asyncio.sleep(seconds)
    return seconds


@task
def total(values: list[int]) -> int:
    """A chord's callback: as trivial as ``add``, over the list of its members' results."""
    return sum(values)


@task
def mark(number: int, path: str) -> int:
    """Appends ``number`` to the file at ``path`` (one line per run: a task that ran twice
    shows twice) and returns it."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{number}\n".encode())
    finally:
        os.close(fd)
    return number
