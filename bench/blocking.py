"""Blocking code run from the asyncio runner: in a worker thread that gives up at its next
step once the awaiting task is cancelled (a timeout, Ctrl-C).

A thread cannot be cancelled, and ``asyncio.run`` waits for the default executor's threads
before it returns, so blocking work must check ``abandoned`` between its calls and keep each
call bounded by its own timeout. It must never touch the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


class Abandoned(RuntimeError):
    """The task waiting for this work was cancelled; the work stopped early."""


async def in_thread(work: Callable[[threading.Event], T]) -> T:
    """``work(abandoned)`` in a worker thread; ``abandoned`` is set once we stop waiting."""
    abandoned = threading.Event()
    try:
        return await asyncio.to_thread(work, abandoned)
    finally:
        abandoned.set()


def steps(count: int, abandoned: threading.Event) -> Iterator[int]:
    """``range(count)``, raising ``Abandoned`` before any step once ``abandoned`` is set."""
    for i in range(count):
        if abandoned.is_set():
            raise Abandoned(f"abandoned after {i} of {count} steps")
        yield i
