"""Small statistics: percentiles of latency samples, and the summary of repeated runs."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), linearly interpolated between closest ranks."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p99 and p99.9 of round-trip times given in seconds, in milliseconds."""
    ms = [s * 1000.0 for s in seconds]
    return {
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "p999_ms": percentile(ms, 99.9),
    }


def summarize(values: Sequence[float], unit: str) -> dict[str, Any]:
    """Median, min and max of one metric over its repeats (the raw values too)."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "unit": unit,
        "values": list(values),
    }
