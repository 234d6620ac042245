"""Quickstart tasks: any function decorated with ``@task`` can run in the background.

Run a local cluster that runs them (from this folder, examples/quickstart):

    uv run fastworker dev --task-modules tasks

then, in another terminal in the same folder, ``uv run python main.py``.
"""

from __future__ import annotations

import asyncio

from fastworker import task


@task
def add(x: float, y: float) -> float:
    """A plain function: blocking code runs on a worker thread."""
    return x + y


@task
async def slugify(title: str) -> str:
    """An async function: runs on the worker's event loop."""
    await asyncio.sleep(0.01)  # stands for I/O: a database, an HTTP call...
    return "-".join(title.lower().split())


@task(priority="high", max_retries=2)
def word_count(text: str) -> int:
    """Options go in the decorator: a default priority, retries, a time limit..."""
    return len(text.split())
