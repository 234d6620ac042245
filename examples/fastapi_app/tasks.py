"""Tasks the FastAPI app (app.py) queues. See README.md for how to run both."""

from __future__ import annotations

import asyncio
import hashlib

from fastworker import task


@task
async def send_welcome_email(email: str) -> str:
    """Stands for a slow call to a mail service, which should not hold up a request."""
    await asyncio.sleep(0.05)
    return f"welcome email sent to {email}"


@task
def fingerprint(text: str, rounds: int = 10_000) -> str:
    """CPU work, done on a worker rather than in the web server."""
    digest = text.encode()
    for _ in range(rounds):
        digest = hashlib.sha256(digest).digest()
    return digest.hex()[:16]
