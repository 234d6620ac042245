"""Tasks for the priorities example (main.py); see main.py for how to run both."""

from __future__ import annotations

import asyncio

from fastworker import task


@task
async def long_job(seconds: float) -> str:
    """Keeps the only worker slot busy while the other tasks queue up."""
    await asyncio.sleep(seconds)
    return "done"


@task
def job(label: str) -> str:
    """Queued at every priority by main.py, which reads when each one started."""
    return label


@task(priority="critical")
def page_on_call(message: str) -> str:
    """A task whose default priority is critical (when submitted by the function)."""
    return f"paged: {message}"
