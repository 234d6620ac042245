"""Tasks for the callbacks example (main.py); see main.py for how to run both."""

from __future__ import annotations

import asyncio

from fastworker import task


@task
async def resize_image(name: str, width: int) -> str:
    await asyncio.sleep(0.05 * width / 100)  # stands for real work
    return f"{name}@{width}px"


@task
def corrupt_image(name: str) -> None:
    raise OSError(f"cannot decode {name}")
