"""Which Python values a task's arguments and result may be: the one rule, applied by the
client SDK before it sends a task and by the subworker before it sends a result.

The rule is that a value must come back as what was sent (PROTOCOL.md §3, "Portable
values"). msgspec would happily encode far more (a set as an array, a UUID or Decimal as a
str, a dataclass as a map, a naive datetime as an ISO string), but the other side would
then receive a *different* type, silently. So only these pass:

    None, bool, int (-2**63 .. 2**64-1), float (NaN and infinities included), str,
    bytes (bytearray and memoryview too: they come back as bytes), list, tuple (comes
    back as a list), dict (keys: None, bool, int, float, str, bytes, or tuples of these,
    which come back as tuples), a time-zone-aware datetime (comes back
    as the same instant in UTC), msgspec.msgpack.Ext (passed through opaque), and a
    value of a type registered in ``value_types`` (uuid.UUID, decimal.Decimal, and the
    application's own, registered with ``fastworker.register_type``): it is sent as a
    msgpack extension value, and ``portable_form`` gives the value in that form.

Types are matched exactly: a subclass (an IntEnum, a StrEnum, an OrderedDict, a
namedtuple) would come back as its plain base type, so it is refused too. Arrays and maps
may nest at most ``MAX_NESTING`` deep, the value itself counting as the first level.

The check never raises and never recurses; it must stay cheap, as it runs on every task
submitted: scalars and containers holding only scalars are decided without a Python loop
over their items, and only a value found to hold a registered type is walked again to
put it in wire form.
"""

from __future__ import annotations

import dataclasses
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec

from fastworker_protocol.limits import MAX_NESTING
from fastworker_protocol.value_types import VALUE_TYPES, ValueTypeError

MIN_INT = -(2**63)
MAX_INT = 2**64 - 1

_KEY_SCALARS = frozenset({type(None), bool, float, str, bytes})
_LEAVES = frozenset(
    {type(None), bool, float, str, bytes, bytearray, memoryview, msgspec.msgpack.Ext}
)
_BASES = (bool, int, float, str, bytes, list, tuple, dict)  # bool before int: the nearer base
_WITH_INT = _LEAVES | {int}
_STR = frozenset({str})
_SHORT = 8  # up to this many items, a Python loop beats building a set of types
_WIRE_TYPES = (
    "None, bool, int, float, str, bytes, list, tuple, dict, time-zone-aware datetime, "
    "uuid.UUID, decimal.Decimal and the types registered with fastworker.register_type"
)
_REGISTER = "or register an encoding for it with fastworker.register_type(...)"


class _Extended:
    """What ``_examine`` finds of a portable value that holds a registered type."""


_EXTENDED = _Extended()


def check_portable(value: object, where: str = "value", limit: int = MAX_NESTING) -> str | None:
    """``None`` if ``value`` travels and comes back as itself, else what is wrong with it,
    naming where (``where`` is the name of ``value`` itself, e.g. ``args`` or ``result``)."""
    found = _examine(value, where, limit)
    return None if found is _EXTENDED else found  # type: ignore[return-value]


def portable_form(
    value: Any, where: str = "value", limit: int = MAX_NESTING
) -> tuple[Any, str | None]:
    """``(value as it is sent, None)`` if it is portable, else ``(value, the problem)``.
    As sent, every value of a registered type is its msgpack extension value; a value
    holding none is returned as it is, with no copy."""
    found = _examine(value, where, limit)
    if found is None:
        return value, None
    if found is _EXTENDED:
        try:
            return VALUE_TYPES.to_wire(value), None
        except ValueTypeError as exc:
            return value, f"{where}: {exc}"
    return value, found  # type: ignore[return-value]


def _examine(value: object, where: str, limit: int) -> str | _Extended | None:
    """``check_portable``, telling apart a value that holds a registered type."""
    kind = type(value)
    if kind in _LEAVES:
        return None
    if kind is int:
        return None if MIN_INT <= value <= MAX_INT else _leaf_problem(value, where)  # type: ignore[operator]
    if kind is list or kind is tuple:
        if _flat(value):
            return None
    elif kind is dict:
        if _flat_map(value):  # type: ignore[arg-type]
            return None
    elif kind in VALUE_TYPES.by_type:
        return _EXTENDED
    else:
        return _leaf_problem(value, where)
    return _walk(value, where, limit)


def _flat(items: Any) -> bool:
    """Scalars only, ints in range. A short one is looped over (cheaper than building a set
    of types); a long one is decided in C (``issuperset``, ``min``, ``max``)."""
    if len(items) <= _SHORT:
        for item in items:
            kind = type(item)
            if kind is int:
                if not MIN_INT <= item <= MAX_INT:
                    return False
            elif kind not in _LEAVES:
                return False
        return True
    if _LEAVES.issuperset(map(type, items)):
        return True
    kinds = set(map(type, items))
    if not _WITH_INT.issuperset(kinds):
        return False
    ints = items if len(kinds) == 1 else [i for i in items if type(i) is int]
    return bool(min(ints) >= MIN_INT and max(ints) <= MAX_INT)


def _flat_map(items: dict[Any, Any]) -> bool:
    if len(items) <= _SHORT:
        for key, item in items.items():
            kind = type(item)
            if type(key) is not str:
                return False
            if kind is int:
                if not MIN_INT <= item <= MAX_INT:
                    return False
            elif kind not in _LEAVES:
                return False
        return True
    return _STR.issuperset(map(type, items)) and _flat(list(items.values()))


def _walk(root: Any, where: str, limit: int) -> str | _Extended | None:
    """The first problem inside a container, depth first (iterative, so never too deep)."""
    registered = VALUE_TYPES.by_type
    extended = False
    stack: list[tuple[Any, str, int]] = [(root, where, 1)]
    while stack:
        node, path, depth = stack.pop()
        if depth > limit:
            return f"{where} nests deeper than the protocol's {limit} arrays and maps"
        pairs = node.items() if type(node) is dict else enumerate(node)
        for key, child in pairs:
            at = f"{path}[{key!r}]"
            if type(node) is dict and (problem := _key_problem(key, path)):
                return problem
            kind = type(child)
            if kind in _LEAVES:
                continue
            if kind is list or kind is tuple or kind is dict:
                if depth + 1 > limit:  # caught here too, before a deep path is built
                    return f"{where} nests deeper than the protocol's {limit} arrays and maps"
                if not ((kind is dict and _flat_map(child)) or (kind is not dict and _flat(child))):
                    stack.append((child, at, depth + 1))
            elif kind in registered:
                extended = True
            elif problem := _leaf_problem(child, at):
                return problem
    return _EXTENDED if extended else None


def _key_problem(key: object, path: str) -> str | None:
    if _portable_key(key, MAX_NESTING):
        return None
    return (
        f"{path} has a key {key!r} of type {type(key).__qualname__}: a map key must be "
        "None, a bool, an int within 64 bits, a float, a str, bytes or a tuple of these, "
        "as only those come back as they were sent"
    )


def _portable_key(key: object, depth: int) -> bool:
    """msgpack decodes an array used as a map key as a tuple, so tuples of portable keys
    come back as themselves too (bounded: a key nests at most ``depth`` tuples)."""
    kind = type(key)
    if kind in _KEY_SCALARS or isinstance(key, Id):
        return True
    if kind is int:
        return bool(MIN_INT <= key <= MAX_INT)  # type: ignore[operator]
    return kind is tuple and depth > 0 and all(_portable_key(k, depth - 1) for k in key)  # type: ignore[attr-defined]


class Id(str):
    """A ``str`` that is an id (the SDK's task and workflow handles): portable, as the one
    ``str`` subclass that is, because what it stands for is its text. It is sent as that
    text and arrives as a plain ``str``."""

    __slots__ = ()


def _leaf_problem(value: object, path: str) -> str | None:
    """``None`` for an aware datetime, an int in range or an id; else the problem with a
    hint."""
    kind = type(value)
    if kind is datetime and value.utcoffset() is not None:  # type: ignore[attr-defined]
        return None
    if isinstance(value, Id):
        return None
    if kind is int:
        if MIN_INT <= value <= MAX_INT:  # type: ignore[operator]
            return None
        return (
            f"{path} is an int outside msgpack's 64-bit range (-2**63 to 2**64-1): send it as a str"
        )
    return f"{path} has type {_name(kind)}, which {_hint(value)}"


def _name(kind: type) -> str:
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _hint(value: object) -> str:
    """Why the type is refused and what to send instead."""
    if isinstance(value, set | frozenset):
        return "has no wire form (it would come back a list): send a list, e.g. sorted(value)"
    if isinstance(value, datetime):
        return (
            "is naive (no tzinfo), so its instant is ambiguous: make it aware, "
            "e.g. value.replace(tzinfo=UTC)"
        )
    if isinstance(value, Decimal | UUID):
        registered: type = Decimal if isinstance(value, Decimal) else UUID
        return (
            f"is a subclass of {_name(registered)} and would come back a plain "
            f"{registered.__name__}: send {registered.__name__}(value), {_REGISTER}"
        )
    if isinstance(value, date | time | timedelta):
        return (
            f"has no wire form (it would come back a str): send str(value) or a number, {_REGISTER}"
        )
    if isinstance(value, _BASES):
        base = next(b for b in _BASES if isinstance(value, b))
        return (
            f"is a subclass of {base.__name__} and would come back a plain {base.__name__}: "
            f"send {base.__name__}(value)"
        )
    if (dataclasses.is_dataclass(value) and not isinstance(value, type)) or isinstance(
        value, msgspec.Struct
    ):
        return (
            "would come back a dict: send a dict, e.g. dataclasses.asdict(value) "
            f"or msgspec.to_builtins(value), {_REGISTER}"
        )
    return f"has no wire form: values may only be {_WIRE_TYPES}; {_REGISTER}"
