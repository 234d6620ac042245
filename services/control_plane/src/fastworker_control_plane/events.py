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

DEFAULT_BACKLOG = 10_000  # events a subscriber may fall behind before it loses some
DEFAULT_MAX_SUBSCRIPTIONS = 8  # dashboard streams at once (each may hold its backlog)
EVENT_BYTES = 256  # what one queued event holds, about (its object and its kind string)


class TooManySubscriptions(RuntimeError):
    """Every subscription the bus allows is taken."""


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

    @property
    def queued(self) -> int:
        """Events waiting to be taken."""
        return self._queue.qsize()

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
    def __init__(self, max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS) -> None:
        self.max_subscriptions = max_subscriptions
        self._subscriptions: list[Subscription] = []
        self.published = 0
        self.dropped = 0

    @property
    def subscriptions(self) -> int:
        return len(self._subscriptions)

    @property
    def queued(self) -> int:
        """Events waiting in every subscription, together."""
        return sum(s.queued for s in self._subscriptions)

    @property
    def has_subscribers(self) -> bool:
        return bool(self._subscriptions)

    def subscribe(self, backlog: int = DEFAULT_BACKLOG) -> Subscription:
        """A new subscription; ``TooManySubscriptions`` past ``max_subscriptions``."""
        if len(self._subscriptions) >= self.max_subscriptions:
            raise TooManySubscriptions(
                f"{len(self._subscriptions)} event streams are open, the most allowed "
                "(--max-event-streams): close one or raise the bound"
            )
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
