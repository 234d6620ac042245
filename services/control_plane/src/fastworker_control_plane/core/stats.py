"""What the task board has done, kept as plain numbers: counters by task name and
priority, run-time and queue-wait histograms, and finished tasks per second.

Pure, like the rest of the core: each task record holds the ``TaskLine`` of its name and
priority, so the board records with an attribute add as tasks move, and the metrics
endpoint and dashboard read the numbers when asked. Nothing here knows Prometheus or the
clock.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum

from fastworker_common.histogram import Histogram

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


class TaskLine:
    """The numbers of one task name at one priority. Each task record holds its line, so
    recording is an attribute add (no key hashing on the task path)."""

    __slots__ = (
        "cancelled",
        "failed",
        "queue_wait",
        "retried",
        "run_time",
        "started",
        "submitted",
        "succeeded",
    )

    def __init__(self) -> None:
        self.submitted = self.started = self.succeeded = 0
        self.failed = self.retried = self.cancelled = 0
        self.run_time = Histogram()
        self.queue_wait = Histogram()

    def count(self, tally: Tally) -> int:
        return int(getattr(self, tally.value))


class TaskStats:
    def __init__(self) -> None:
        self.lines: dict[tuple[str, str], TaskLine] = {}
        self.throughput = Throughput()

    def line(self, name: str, priority: str) -> TaskLine:
        line = self.lines.get((name, priority))
        if line is None:
            line = self.lines[name, priority] = TaskLine()
        return line

    def started(self, line: TaskLine, waited: float) -> None:
        line.started += 1
        line.queue_wait.observe(max(0.0, waited))

    def ran(self, line: TaskLine, seconds: float) -> None:
        """One attempt ran for ``seconds`` (whatever its outcome)."""
        line.run_time.observe(max(0.0, seconds))

    def finished(self, line: TaskLine, tally: Tally, now: float) -> None:
        if tally is Tally.SUCCEEDED:
            line.succeeded += 1
            self.throughput.add(now, ok=True)
        elif tally is Tally.FAILED:
            line.failed += 1
            self.throughput.add(now, ok=False)
        else:
            line.cancelled += 1

    @property
    def counts(self) -> Counter[tuple[Tally, str, str]]:
        """Every non-zero count by (tally, task name, priority)."""
        out: Counter[tuple[Tally, str, str]] = Counter()
        for (name, priority), line in self.lines.items():
            for tally in Tally:
                if n := line.count(tally):
                    out[tally, name, priority] = n
        return out

    @property
    def run_time(self) -> dict[tuple[str, str], Histogram]:
        return {key: line.run_time for key, line in self.lines.items() if line.run_time.count}

    @property
    def queue_wait(self) -> dict[tuple[str, str], Histogram]:
        return {k: line.queue_wait for k, line in self.lines.items() if line.queue_wait.count}

    def totals(self) -> dict[str, int]:
        """Each tally summed over names and priorities."""
        return {
            str(tally): sum(line.count(tally) for line in self.lines.values()) for tally in Tally
        }
