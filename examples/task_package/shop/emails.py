"""E-mail tasks (loaded with ``--task-modules shop.emails``)."""

from __future__ import annotations

import asyncio

from fastworker import task


@task(max_retries=3, retry_backoff=0.5, retry_on=(ConnectionError,))
async def send_confirmation(customer: str, total: float) -> str:
    """Stands for a call to a mail service; a ``ConnectionError`` would be retried."""
    await asyncio.sleep(0.01)
    return f"to {customer}: your order of {total:.2f} EUR is confirmed"
