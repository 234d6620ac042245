"""Weighted fair share across the queues one worker serves (stride scheduling). No I/O.

Each queue has a *pass*; the queue with work and the lowest pass goes next, and its pass
grows by ``1 / weight``: with ``reports:1,default:4`` and both backlogged, ``default``
gets four tasks for each of ``reports``'s. A queue that had nothing to give is brought up
to the pass of the last queue served before it competes again, so idling earns no credit
to spend in a burst later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class FairShare:
    def __init__(self, weights: Mapping[str, int]) -> None:
        self.weights = dict(weights)
        self._pass = dict.fromkeys(self.weights, 0.0)
        self._now = 0.0  # the pass of the last queue served

    def order(self, ready: Iterable[str]) -> list[str]:
        """The served queues among ``ready``, the one due next first."""
        ranked = []
        for queue in ready:
            current = self._pass.get(queue)
            if current is None:
                continue
            if current < self._now:
                current = self._pass[queue] = self._now
            ranked.append((current, -self.weights[queue], queue))
        ranked.sort()
        return [queue for _, _, queue in ranked]

    def served(self, queue: str) -> None:
        """``queue`` gave the worker a task."""
        self._now = self._pass[queue]
        self._pass[queue] += 1.0 / self.weights[queue]
