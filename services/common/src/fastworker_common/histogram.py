"""A histogram as plain numbers: what the subworker and control plane record per task
for their ``*_seconds`` metrics. Recording is a bisect and two adds; nothing here knows
Prometheus (the metrics endpoints turn it into metric families at scrape time).
"""

from __future__ import annotations

from bisect import bisect_left

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
