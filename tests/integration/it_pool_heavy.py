"""A task module only some subworkers import (the "heavy" pool of the dispatch tests)."""

from __future__ import annotations

import asyncio

from fastworker import task


@task
async def heavy(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds
