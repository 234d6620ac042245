"""The tasks the benchmark runs. Control planes and subworkers import this module as
``bench_tasks`` (the benchmark puts ``bench/`` on their PYTHONPATH)."""

from __future__ import annotations

import asyncio

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
