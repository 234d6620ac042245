"""Named queues and limits on the wire: queue names, weights and rate limits.

A queue name is 1 to 128 characters of ``[A-Za-z0-9_.-]``, so a list of them reads as
``reports:1,default:4`` (commas between queues, a colon before a weight). A rate limit
reads ``<number>/<s|m|h>``: ``20/m`` is twenty a minute.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

import msgspec

DEFAULT_QUEUE = "default"
QUEUE_PATTERN = r"^[A-Za-z0-9_.\-]{1,128}$"
MAX_WEIGHT = 1000

QueueName = Annotated[str, msgspec.Meta(pattern=QUEUE_PATTERN)]
Weight = Annotated[int, msgspec.Meta(ge=1, le=MAX_WEIGHT)]
ConcurrencySetting = Annotated[int, msgspec.Meta(ge=0)]
"""A concurrency limit: tasks running at once; 0 in a change means "no limit"."""

_QUEUE = re.compile(QUEUE_PATTERN)
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*([smh])\s*$")
_PER = {"s": 1.0, "m": 60.0, "h": 3600.0}


def check_queue(name: str) -> str:
    """``name`` if it is a valid queue name; ``ValueError`` saying the rule otherwise."""
    if not _QUEUE.match(name):
        raise ValueError(f"bad queue name {name!r}: use 1 to 128 letters, digits, '_', '.' or '-'")
    return name


def parse_queues(text: str) -> dict[str, int]:
    """``"reports:1,default:4"`` (weights optional, 1 by default) as queue -> weight."""
    queues: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, weight = part.partition(":")
        check_queue(name.strip())
        try:
            value = int(weight) if weight else 1
        except ValueError:
            raise ValueError(f"bad weight in {part!r}: a whole number is needed") from None
        if not 1 <= value <= MAX_WEIGHT:
            raise ValueError(f"bad weight in {part!r}: use 1 to {MAX_WEIGHT}")
        queues[name.strip()] = value
    if not queues:
        raise ValueError("no queue named: give e.g. 'reports,default' or 'reports:1,default:4'")
    return queues


@dataclass(frozen=True, slots=True)
class Rate:
    """A rate limit: ``count`` per ``per`` seconds."""

    count: float
    per: float

    @classmethod
    def parse(cls, text: str) -> Rate:
        match = _RATE.match(text)
        if match is None or float(match[1]) <= 0:
            raise ValueError(
                f"bad rate limit {text!r}: write a positive number per s, m or h, e.g. '20/m'"
            )
        return cls(float(match[1]), _PER[match[2]])

    @property
    def per_second(self) -> float:
        return self.count / self.per


def check_rate(text: str | None) -> str | None:
    """``text`` if it is ``None`` or a valid rate; ``ValueError`` otherwise."""
    if text is not None:
        Rate.parse(text)
    return text
