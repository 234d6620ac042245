"""Tasks of the queues-and-limits tests: each reports when and where it ran."""

from __future__ import annotations

import asyncio
import os
import time

from fastworker import task


def _ran(started: float, **extra: object) -> dict[str, object]:
    return {"pid": os.getpid(), "start": started, "end": time.time(), **extra}


@task(queue="reports")
async def build_report(n: int) -> dict[str, object]:
    return _ran(time.time(), n=n)


@task
async def send_email(n: int) -> dict[str, object]:
    return _ran(time.time(), n=n)


@task(rate_limit="10/s")
async def call_api(n: int) -> dict[str, object]:
    return _ran(time.time(), n=n)


@task(concurrency_limit=1, concurrency_key="customer")
async def import_customer(customer: str, seconds: float) -> dict[str, object]:
    started = time.time()
    await asyncio.sleep(seconds)
    return _ran(started, customer=customer)
