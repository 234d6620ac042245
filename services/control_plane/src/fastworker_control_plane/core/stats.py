"""What the task board has done, kept as plain numbers: counters by task name and
priority, run-time and queue-wait histograms, and finished tasks per second.

Pure, like the rest of the core: the board records as tasks move (a dict lookup and an
add), and the metrics endpoint and dashboard read the numbers when asked. Nothing here
knows Prometheus or the clock.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from fastworker._histogram import Histogram

THROUGHPUT_SPAN = 600  # seconds of per-second throughput kept


class Tally(StrEnum):
    """What is counted per task name and priority."""

    SUBMITTED = "submitted"
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRIED = "retried"
    CANCELLED = "cancelled"


class Throughput:
    """Tasks finished per whole second, for the last ``span`` seconds (a ring)."""

    def __init__(self, span: int = THROUGHPUT_SPAN) -> None:
        self.span = span
        self._second = [-1] * span
        self._succeeded = [0] * span
        self._failed = [0] * span

    def add(self, now: float, *, ok: bool) -> None:
        second = int(now)
        slot = second % self.span
        if self._second[slot] != second:
            self._second[slot], self._succeeded[slot], self._failed[slot] = second, 0, 0
        if ok:
            self._succeeded[slot] += 1
        else:
            self._failed[slot] += 1

    def points(self, now: float, window: int) -> list[tuple[int, int, int]]:
        """``(second, succeeded, failed)`` for the last ``window`` seconds, oldest first."""
        last = int(now)
        out = []
        for second in range(last - min(window, self.span) + 1, last + 1):
            slot = second % self.span
            if self._second[slot] == second:
                out.append((second, self._succeeded[slot], self._failed[slot]))
            else:
                out.append((second, 0, 0))
        return out


@dataclass
class TaskStats:
    counts: Counter[tuple[Tally, str, str]] = field(default_factory=Counter)
    run_time: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    queue_wait: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    throughput: Throughput = field(default_factory=Throughput)

    def count(self, tally: Tally, name: str, priority: str) -> None:
        self.counts[tally, name, priority] += 1

    def started(self, name: str, priority: str, waited: float) -> None:
        self.counts[Tally.STARTED, name, priority] += 1
        _histogram(self.queue_wait, name, priority).observe(max(0.0, waited))

    def ran(self, name: str, priority: str, seconds: float) -> None:
        """One attempt ran for ``seconds`` (whatever its outcome)."""
        _histogram(self.run_time, name, priority).observe(max(0.0, seconds))

    def finished(self, tally: Tally, name: str, priority: str, now: float) -> None:
        self.counts[tally, name, priority] += 1
        if tally is not Tally.CANCELLED:
            self.throughput.add(now, ok=tally is Tally.SUCCEEDED)

    def totals(self) -> dict[str, int]:
        """Each tally summed over names and priorities."""
        out = dict.fromkeys(Tally, 0)
        for (tally, _, _), n in self.counts.items():
            out[tally] += n
        return {str(tally): n for tally, n in out.items()}


def _histogram(table: dict[tuple[str, str], Histogram], name: str, priority: str) -> Histogram:
    histogram = table.get((name, priority))
    if histogram is None:
        histogram = table[name, priority] = Histogram()
    return histogram
