"""What a subworker has run: outcomes by task name and a run-time histogram, as plain
numbers read by its metrics endpoint at scrape time (recording is a dict lookup and an
add). ``Histogram`` is shared with the control plane's own statistics.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field

from fastworker_protocol import Outcome

# Prometheus' default buckets, plus the long tail task queues have.
DURATION_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
)


class Histogram:
    """Observations in fixed buckets (``le`` bounds, inclusive), plus their sum."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = DURATION_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.sum += value

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, observations <= bound)`` per bucket, ending with +Inf."""
        total, out = 0, []
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += n
            out.append((bound, total))
        return out


@dataclass
class RunStats:
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (name, outcome)
    run_time: dict[str, Histogram] = field(default_factory=dict)

    def record(self, name: str, outcome: Outcome) -> None:
        """One attempt ended: ``success``, or its error's reason (``exception``,
        ``timeout``, ``cancelled``, ``interrupted``, ``unserializable_result``)."""
        kind = "success" if outcome.ok else outcome.error.reason if outcome.error else "exception"
        self.outcomes[name, kind] += 1
        if outcome.started_at is not None and outcome.finished_at is not None:
            histogram = self.run_time.get(name)
            if histogram is None:
                histogram = self.run_time[name] = Histogram()
            histogram.observe(max(0.0, outcome.finished_at - outcome.started_at))
