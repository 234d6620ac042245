"""The event bus: every task transition as ``task.<state>``, to whoever subscribes.

Fire and forget, as the seed has it: subscribers are observers, never participants. Each
has a bounded queue; when a subscriber falls behind, its new events are dropped and
counted (per subscriber and in total) rather than slowing dispatch. With no subscribers
the board does not even record its transitions.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

from fastworker_control_plane.core.board_types import Change

DEFAULT_BACKLOG = 10_000


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # "task.<state>", e.g. "task.running"
    task_id: str
    name: str
    worker_id: str | None
    attempts: int
    at: float  # Unix seconds


class Subscription:
    def __init__(self, bus: EventBus, backlog: int) -> None:
        self._bus = bus
        self._queue: asyncio.Queue[Event] = asyncio.Queue(backlog)
        self.dropped = 0

    def offer(self, event: Event) -> bool:
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
            return False
        return True

    async def get(self) -> Event:
        return await self._queue.get()

    def take(self, limit: int) -> list[Event]:
        """Up to ``limit`` waiting events, oldest first, without waiting."""
        out: list[Event] = []
        while len(out) < limit and not self._queue.empty():
            out.append(self._queue.get_nowait())
        return out

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            yield await self._queue.get()

    def close(self) -> None:
        self._bus.unsubscribe(self)


class EventBus:
    def __init__(self) -> None:
        self._subscriptions: list[Subscription] = []
        self.published = 0
        self.dropped = 0

    @property
    def has_subscribers(self) -> bool:
        return bool(self._subscriptions)

    def subscribe(self, backlog: int = DEFAULT_BACKLOG) -> Subscription:
        subscription = Subscription(self, backlog)
        self._subscriptions.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)

    def publish(self, changes: Iterable[Change], at: float) -> None:
        for change in changes:
            event = Event(
                f"task.{change.state}",
                change.task_id,
                change.name,
                change.worker_id,
                change.attempts,
                at,
            )
            self.published += 1
            for subscription in self._subscriptions:
                if not subscription.offer(event):
                    self.dropped += 1
