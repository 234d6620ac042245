"""Requests held until tasks are final (``Submit``/``Get`` with ``wait``).

A held request costs one future and one timer, however many tasks it waits for: it sits
under each of its task ids and counts down as they are resolved. It answers with the
results it was resolved with when they can no longer be read (a task whose
``result_ttl`` is 0 keeps no result, but whoever waited for it gets it).

Held requests are bounded: each one holds its NNG context, its handler and its timer
(about 7 KiB in all), so past ``WaitBudget.max_held`` of them (task and workflow waits
together) a new wait is not held but answered at once with what is known now, as a wait
that reached ``--max-wait`` is; clients ask again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from fastworker_control_plane.world import Clock, LoopClock
from fastworker_protocol import TaskResult

DEFAULT_MAX_HELD_WAITS = 5_000
HELD_WAIT_BYTES = 7 * 1024  # what one held request holds, about (measured: 6.5 KiB)


class WaitBudget:
    """How many requests may be held at once, over every kind of wait."""

    def __init__(self, max_held: int) -> None:
        if max_held < 0:
            raise ValueError("max_held must be >= 0")
        self.max_held = max_held
        self.held = 0
        self.refused = 0  # waits answered at once because the budget was spent

    def take(self) -> bool:
        """One more held request, if the budget allows it (else it is counted refused)."""
        if self.held >= self.max_held:
            self.refused += 1
            return False
        self.held += 1
        return True

    def give_back(self) -> None:
        self.held -= 1


class _Wait:
    __slots__ = ("done", "remaining", "results")

    def __init__(self, done: asyncio.Future[None], remaining: int) -> None:
        self.done = done
        self.remaining = remaining  # resolutions still to come before it is answered
        self.results: dict[str, TaskResult] = {}  # as resolved

    def resolved(self, result: TaskResult) -> None:
        self.results[result.task_id] = result
        self.remaining -= 1
        if self.remaining <= 0:
            self.release()

    def release(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


class CompletionWaiters:
    def __init__(self, budget: WaitBudget | None = None, clock: Clock | None = None) -> None:
        """``clock``: the engine's, whose wake-ups end the waits (``world``)."""
        self.budget = WaitBudget(DEFAULT_MAX_HELD_WAITS) if budget is None else budget
        self._clock = clock or LoopClock()
        self._held = 0  # of the budget's, those held here
        # Per task id, its waits in the order they came (a dict as an ordered set: a
        # wait leaves in O(1), however many wait for one task).
        self._waiting: dict[str, dict[_Wait, None]] = {}

    async def wait(
        self,
        task_ids: list[str],
        timeout: float,
        lookup: Callable[[str], TaskResult | None],
        *,
        any_final: bool = False,
    ) -> list[TaskResult | None]:
        """Wait until every known task in ``task_ids`` is final (with ``any_final``: one of
        them is, or one is unknown) or ``timeout`` passes, then return what ``lookup``
        says of each (or, if it no longer knows a task, the result it was resolved with)."""
        delivered: dict[str, TaskResult] = {}
        pending: dict[str, None] = {}  # the tasks not final yet, in order, once each
        for task_id in task_ids:
            current = lookup(task_id)
            if current is not None and not current.status.is_final:
                pending[task_id] = None
        settled = len(pending) < len(set(task_ids))
        if pending and not (any_final and settled) and timeout > 0 and self.budget.take():
            loop = asyncio.get_running_loop()
            waiting = _Wait(loop.create_future(), 1 if any_final else len(pending))
            for task_id in pending:
                self._waiting.setdefault(task_id, {})[waiting] = None
            timer = self._clock.call_at(self._clock() + timeout, waiting.release)
            self._held += 1
            try:
                await waiting.done
                delivered = waiting.results
            finally:
                timer.cancel()
                self._held -= 1
                self.budget.give_back()
                for task_id in pending:
                    self._forget(task_id, waiting)
        return [lookup(task_id) or delivered.get(task_id) for task_id in task_ids]

    def resolve(self, results: Iterable[TaskResult]) -> None:
        for result in results:
            for waiting in self._waiting.pop(result.task_id, ()):
                waiting.resolved(result)

    def release_all(self) -> None:
        """Answer every held wait now (shutdown): each gets the tasks' current state."""
        for waits in self._waiting.values():
            for waiting in waits:
                waiting.release()

    def _forget(self, task_id: str, waiting: _Wait) -> None:
        waits = self._waiting.get(task_id)
        if waits is None:
            return
        waits.pop(waiting, None)
        if not waits:
            del self._waiting[task_id]

    def __len__(self) -> int:
        """Requests held here now."""
        return self._held
