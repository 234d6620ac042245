"""An asyncio event loop whose clock can skip ahead: time passes at once while nothing runs.

The loop's ``time()`` is the real monotonic clock plus an offset. Each turn, asyncio asks
its selector to wait until the next timer (or forever, with none). The selector here first
looks for I/O without waiting; if there is none, the loop is idle, and it asks ``skip``
how far the clock may jump instead of waiting: the whole wait (the next timer fires now),
part of it, or nothing (then it really waits, and time passes as usual, as it must while a
task runs on a thread or in a child process, whose time the loop cannot skip).

Everything on the loop that reads ``loop.time()`` sees the skipped time: timers,
``asyncio.sleep`` and ``wait_for`` in tasks and in the code under test. Only code reading
``time.time()`` or ``time.monotonic()`` itself does not.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable

Skip = Callable[[float | None], float | None]
"""Given the idle loop's wait (``None``: no timer at all), the seconds to jump instead of
waiting, or ``None`` to wait for real."""


class _SkippingSelector(selectors.DefaultSelector):
    def __init__(self, skip: Skip, jump: Callable[[float], None]) -> None:
        super().__init__()
        self._skip = skip
        self._jump = jump

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout <= 0:
            return super().select(0)
        ready = super().select(0)
        if ready:
            return ready
        seconds = self._skip(timeout)
        if seconds is None:
            return super().select(timeout)
        self._jump(max(0.0, seconds))
        return []


class SkippingLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose clock jumps over idle waits when ``skip`` allows."""

    def __init__(self, skip: Skip) -> None:
        self._offset = 0.0
        super().__init__(_SkippingSelector(skip, self._advance))

    def time(self) -> float:
        return time.monotonic() + self._offset

    def _advance(self, seconds: float) -> None:
        self._offset += seconds

    @property
    def skipped(self) -> float:
        """Seconds skipped so far."""
        return self._offset
