"""Tasks for the per-task result TTL tests (``@task(result_ttl=)``)."""

from __future__ import annotations

from fastworker import task


@task(result_ttl=0)
def unkept(x: int) -> int:
    """Its result is handed to whoever waits, and kept by nobody."""
    return x * 2


@task(result_ttl=3600)
def kept(x: int) -> int:
    return x * 3


@task(result_ttl=0, max_retries=0)
def unkept_failure() -> None:
    raise ValueError("failed with no result kept")
