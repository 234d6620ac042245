"""Range rules of the protocol: how deep values may nest, which numbers a field takes.

The ranges are msgspec constraints on the message fields, so a number out of range is an
``invalid_message`` naming its field (``at `$.tasks[0].eta```), never an error later on.
The nesting rule is applied by the control plane to submitted arguments (PROTOCOL.md §3):
a value it accepts must be one every later step (journal, dashboard JSON, subworker) can
still encode, and encoders recurse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import msgspec

MAX_NESTING = 32
"""Arrays and maps a task's ``args`` and ``kwargs`` may nest, the containers included."""

MAX_TIMESTAMP = 253_402_300_799.0
"""9999-12-31T23:59:59Z in Unix seconds: the last time a msgpack timestamp can carry here."""

UnixTime = Annotated[float, msgspec.Meta(ge=0, le=MAX_TIMESTAMP)]
"""A time: finite, from 1970 to the end of 9999 (NaN fails every comparison, so is out)."""

Seconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_TIMESTAMP)]
"""A duration that may be zero (a ``wait``); infinity and NaN are out."""

PositiveSeconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMESTAMP)]
"""A duration that must be positive (a ``timeout``)."""

Count = Annotated[int, msgspec.Meta(ge=0)]
"""A number of things (retries, prefetched tasks): not negative."""

_CONTAINERS = (list, tuple, dict)  # msgpack arrays decode as lists (tuples as map keys)


def nesting_depth(value: object, limit: int = MAX_NESTING) -> int:
    """How many arrays and maps deep ``value`` nests: a scalar is 0, ``[1]`` is 1, and
    ``{"a": [1]}`` is 2 (map keys count, as msgpack keys may be arrays).

    The walk is iterative (no recursion to exhaust) and stops as soon as it is past
    ``limit``, returning ``limit + 1``; containers holding only scalars are skipped in C.
    """
    if _flat(value):  # the common case (plain arguments), decided in C
        return 1
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)] if isinstance(value, _CONTAINERS) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return limit + 1
        deepest = max(deepest, depth)
        children = _children(node)
        if not any(issubclass(t, _CONTAINERS) for t in set(map(type, children))):
            continue
        stack.extend((c, depth + 1) for c in children if isinstance(c, _CONTAINERS))
    return deepest


_SCALARS = frozenset({int, float, str, bytes, bool, type(None)})


def _flat(value: object) -> bool:
    """A list, tuple or dict holding scalars only (its depth is 1)."""
    kind = type(value)
    if kind is list or kind is tuple:
        return _SCALARS.issuperset(map(type, value))  # type: ignore[call-overload]
    if kind is dict:
        items: dict[object, object] = value  # type: ignore[assignment]
        return _SCALARS.issuperset(map(type, items)) and _SCALARS.issuperset(
            map(type, items.values())
        )
    return False


def _children(node: object) -> Sequence[object]:
    if isinstance(node, dict):
        return [*node.keys(), *node.values()]
    assert isinstance(node, list | tuple)
    return node
