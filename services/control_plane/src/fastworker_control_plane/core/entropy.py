"""Ids and jitter, given to the core from outside: nothing in ``core/`` reads entropy
itself, so a test (or a replay) decides every id and every retry delay.

The engine gives the board and the workflows the system's entropy (``world``); until
then a board counts its ids and jitters to the middle of each range (``counting``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import count

NewId = Callable[[], str]
Uniform = Callable[[float, float], float]


@dataclass(frozen=True, slots=True)
class Entropy:
    new_id: NewId  # a fresh task id (32 hex digits, as the SDK's)
    uniform: Uniform  # a number between its two arguments: a retry delay's jitter


def midpoint(low: float, high: float) -> float:
    return (low + high) / 2


def counting(uniform: Uniform = midpoint) -> Entropy:
    """No entropy at all: ids ``000...1``, ``000...2``, ... (never a client's uuid4, whose
    version digit is 4) and ``uniform`` for jitter."""
    numbers = count(1)
    return Entropy(new_id=lambda: f"{next(numbers):032x}", uniform=uniform)
