"""Times and durations as the commands take them: ``12h``, ``30m``, ``1h30m``, ``7d``,
or an ISO 8601 date and time (naive = UTC). Pure: ``now`` is passed in."""

from __future__ import annotations

import argparse
import math
import re
import time
from datetime import UTC, datetime

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?[smhdw])+")


def parse_duration(text: str) -> float:
    """Seconds in a duration such as ``90s``, ``30m``, ``12h``, ``7d``, ``2w``, ``1h30m``."""
    compact = text.strip().lower()
    if not _DURATION.fullmatch(compact):
        raise ValueError(f"not a duration: {text!r} (e.g. 90s, 30m, 12h, 7d, 1h30m)")
    return sum(float(n) * UNITS[unit] for n, unit in _PART.findall(compact))


def parse_seconds(text: str) -> float:
    """A number of seconds (``300``, ``0.5``), or a duration (``5m``)."""
    try:
        seconds = float(text)
    except ValueError:
        return parse_duration(text)
    if not math.isfinite(seconds):
        raise ValueError(f"not a number of seconds: {text!r}")
    return seconds


def parse_when(text: str, now: float) -> float:
    """Unix seconds of ``text``: a duration ago (``12h`` is twelve hours before ``now``),
    or an ISO 8601 date or date and time (``2026-12-03``, ``2026-12-03T08:00``,
    ``2026-12-03T08:00:00+01:00``; without an offset, UTC)."""
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"not a time: {text!r} (a duration ago such as 30m, 12h or 7d, or an ISO 8601 "
            "date and time such as 2026-12-03T08:00)"
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def when_type(text: str) -> float:
    """``parse_when`` for argparse, relative to now."""
    try:
        return parse_when(text, time.time())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds_type(text: str) -> float:
    """``parse_seconds`` for argparse; positive."""
    try:
        seconds = parse_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return seconds


def format_time(timestamp: float | None) -> str:
    """A Unix time as the listings show it, in UTC; ``-`` for none."""
    if timestamp is None:
        return "-"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
