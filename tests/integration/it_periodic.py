"""A periodic task, loaded only by the tests that want one ticking."""

from __future__ import annotations

import asyncio

from fastworker import task


@task(repeat_interval=1)
async def every_second() -> str:
    await asyncio.sleep(0.05)
    return "tick"
