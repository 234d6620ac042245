"""What the engine takes from the world: one clock, which reads the time and wakes the
engine up at a time, and the entropy its ids and jitter come from.

Every timer of the control plane's engine (a held fetch's expiry, the next delayed or
retrying task, a spent rate limit's next token) is a deadline on this clock, so a test
that gives the engine a clock it moves by hand (``Clock`` is all it must be) sees fetches
expire and delayed tasks queued without waiting. In production it is ``LoopClock``: wall
time, and wake-ups from the running event loop.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from fastworker_control_plane.core.entropy import Entropy


class Timer(Protocol):
    def cancel(self) -> None: ...


@runtime_checkable
class Clock(Protocol):
    def __call__(self) -> float:
        """Now, in Unix seconds."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` once the clock reads ``when`` (soon, if it already does)."""
        ...


class LoopClock:
    """Time from ``now`` (wall time by default); a wake-up is an event-loop timer for as
    many of the loop's seconds as ``when`` is ahead of ``now()``."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now

    def __call__(self) -> float:
        return self._now()

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        delay = max(0.0, when - self._now())
        return asyncio.get_running_loop().call_later(delay, callback)


def clock_of(clock: Clock | Callable[[], float]) -> Clock:
    """``clock`` itself, or a ``LoopClock`` reading a plain function's time."""
    return clock if isinstance(clock, Clock) else LoopClock(clock)


class Alarm:
    """One wake-up at the earliest deadline asked for: ``set(due)`` moves it earlier,
    never later; ``fire`` runs when it goes off (and may set it again)."""

    def __init__(self, clock: Clock, fire: Callable[[], None]) -> None:
        self._clock = clock
        self._fire = fire
        self._timer: Timer | None = None
        self._due: float | None = None

    def set(self, due: float | None) -> None:
        if due is None or (self._due is not None and self._due <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._clock.call_at(due, self._ring)
        self._due = due

    def _ring(self) -> None:
        self._timer, self._due = None, None
        self._fire()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._due = None, None


def system_entropy() -> Entropy:
    """Random task ids (uuid4, as the SDK makes) and random jitter."""
    return Entropy(new_id=lambda: uuid.uuid4().hex, uniform=random.uniform)
