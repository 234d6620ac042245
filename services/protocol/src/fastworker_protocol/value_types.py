"""Types that travel as msgpack extension values and come back as themselves
(PROTOCOL.md §3, "Portable values").

msgpack carries a few types of its own; anything else would come back as one of them (a
``UUID`` as a str, a dataclass as a map), so ``check_portable`` refuses it, unless its
type is registered here. A value of a registered type is sent as ``ext(code,
encode(value))`` and turned back into its type only where the value is *used*: by the
subworker just before it calls the task (arguments) and by the client as it reads a reply
(results). The control plane never does either: it carries every extension value opaque
(journal, dashboard, ``assign``), so it needs none of an application's types and never
runs an application's ``decode`` on bytes from the wire.

Codes ``0``-``31`` are FastWorker's own (``uuid.UUID`` is 1, ``decimal.Decimal`` 2), codes
``32``-``127`` an application's; msgpack reserves the negative ones (``-1`` is its
timestamp). Types match exactly, as everywhere in the portable-value rule: a subclass of a
registered type is not that type, and would come back as the registered one.

The registry is one per process, like the task registry, because both ends must agree on
it and both import the module that defines the tasks: that module registers its types at
import (``fastworker.register_type``), before any value of them is sent or read.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec

Ext = msgspec.msgpack.Ext

BUILTIN_CODES = range(0, 32)
"""Extension codes FastWorker keeps for the types it supports itself."""

USER_CODES = range(32, 128)
"""Extension codes an application may give its own types (``register_type``)."""

UUID_CODE = 1
DECIMAL_CODE = 2

# Types msgpack already carries as themselves: registering one would change what every
# value of it means on the wire.
_NATIVE = frozenset(
    {type(None), bool, int, float, str, bytes, bytearray, memoryview, list, tuple, dict}
    | {datetime, Ext}
)
_NESTS = frozenset({Ext, list, dict, tuple})  # what may hold an extension value in wire form


class ValueTypeError(ValueError):
    """An extension value that its registered type could not be made from, or a value of
    a registered type that its ``encode`` could not turn into bytes."""


@dataclass(frozen=True, slots=True)
class ValueType:
    """One registered type: ``encode(value) -> bytes`` and ``decode(bytes) -> value``."""

    cls: type[Any]
    code: int
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]

    @property
    def name(self) -> str:
        return f"{self.cls.__module__}.{self.cls.__qualname__}"


class ValueTypes:
    """The registered types of a process, by exact type and by code."""

    def __init__(self) -> None:
        self.by_type: dict[type[Any], ValueType] = {}
        self.by_code: dict[int, ValueType] = {}

    def register(
        self,
        cls: type[Any],
        *,
        code: int,
        encode: Callable[[Any], bytes],
        decode: Callable[[bytes], Any],
        codes: range = USER_CODES,
    ) -> ValueType:
        """Register ``cls`` under ``code`` (which must lie in ``codes``); a clear error for
        a code or a type taken already, or a type msgpack carries itself."""
        _check_registration(cls, code, encode, decode, codes)
        entry = ValueType(cls, code, encode, decode)
        taken = self.by_type.get(cls)
        if taken is not None:
            raise ValueError(f"{entry.name} is already registered, as ext code {taken.code}")
        holder = self.by_code.get(code)
        if holder is not None:
            raise ValueError(f"ext code {code} is already registered, for {holder.name}")
        # Copies, swapped in whole: a thread reading values meanwhile never sees a half-made
        # table. (Registering happens at import, which Python's import lock serializes.)
        self.by_type = {**self.by_type, cls: entry}
        self.by_code = {**self.by_code, code: entry}
        return entry

    def unregister(self, cls: type[Any]) -> None:
        """Forget ``cls`` (for tests that register a type of their own)."""
        entry = self.by_type.get(cls)
        if entry is None:
            return
        self.by_type = {k: v for k, v in self.by_type.items() if k is not cls}
        self.by_code = {k: v for k, v in self.by_code.items() if k != entry.code}

    # --- to the wire ------------------------------------------------------------------------

    def to_wire(self, value: Any) -> Any:
        """``value`` with every value of a registered type replaced by its extension value
        (containers copied where they hold one). Only called once ``check_portable`` has
        passed it, so it is portable and at most ``MAX_NESTING`` deep."""
        kind = type(value)
        entry = self.by_type.get(kind)
        if entry is not None:
            return self._ext(entry, value)
        if kind is list or kind is tuple:
            return kind(self.to_wire(item) for item in value)
        if kind is dict:
            return {key: self.to_wire(item) for key, item in value.items()}
        return value

    def _ext(self, entry: ValueType, value: Any) -> Ext:
        try:
            data = entry.encode(value)
        except Exception as exc:
            raise ValueTypeError(
                f"the encode registered for {entry.name} raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ValueTypeError(
                f"the encode registered for {entry.name} returned {type(data).__name__}, not bytes"
            )
        return Ext(entry.code, bytes(data))

    # --- from the wire ----------------------------------------------------------------------

    def from_wire(self, value: Any) -> Any:
        """``value`` as decoded from msgpack (extension values opaque), with every extension
        value of a registered code turned back into its type. Anything holding none comes
        back as it is, not copied (decided in C for a container of scalars, the common
        case)."""
        kind = type(value)
        if kind is Ext:
            entry = self.by_code.get(value.code)
            return value if entry is None else _decoded(entry, value.data)
        if kind is list or kind is tuple:
            if _NESTS.isdisjoint(map(type, value)):
                return value
            items = [self.from_wire(item) for item in value]
            return value if all(map(operator.is_, items, value)) else items
        if kind is dict:
            if _NESTS.isdisjoint(map(type, value.values())):
                return value
            made = {key: self.from_wire(item) for key, item in value.items()}
            return value if all(map(operator.is_, made.values(), value.values())) else made
        return value

    def ext_hook(self, code: int, data: memoryview) -> Any:
        """For a msgpack decoder (``ext_hook=``): a registered code's value, else the
        extension value as it came."""
        entry = self.by_code.get(code)
        if entry is None:
            return Ext(code, bytes(data))
        return _decoded(entry, bytes(data))


def _decoded(entry: ValueType, data: bytes) -> Any:
    try:
        return entry.decode(data)
    except Exception as exc:
        raise ValueTypeError(
            f"ext code {entry.code} ({entry.name}) cannot be decoded from its "
            f"{len(data)} bytes: {type(exc).__name__}: {exc}"
        ) from exc


def _check_registration(
    cls: object, code: object, encode: object, decode: object, codes: range
) -> None:
    if not isinstance(cls, type):
        raise TypeError(f"register a class, not {cls!r}")
    if cls in _NATIVE:
        raise ValueError(f"{cls.__qualname__} already travels as itself: it cannot be registered")
    if type(code) is not int or code not in codes:
        raise ValueError(
            f"code must be an int from {codes.start} to {codes.stop - 1} (got {code!r}): "
            f"{BUILTIN_CODES.start}-{BUILTIN_CODES.stop - 1} are FastWorker's own and "
            "msgpack reserves the negative ones"
        )
    if not callable(encode) or not callable(decode):
        raise TypeError("encode and decode must be callables (value -> bytes, bytes -> value)")


def _decimal(data: bytes) -> Decimal:
    return Decimal(data.decode("ascii"))


def _uuid(data: bytes) -> UUID:
    return UUID(bytes=data)


VALUE_TYPES = ValueTypes()
"""The process's registered types: FastWorker's own, then an application's."""

VALUE_TYPES.register(
    UUID, code=UUID_CODE, encode=lambda u: u.bytes, decode=_uuid, codes=BUILTIN_CODES
)
# str() of a Decimal is exact (every digit, the exponent, -0, NaN, Infinity), and
# Decimal(str(d)) gives it back digit for digit.
VALUE_TYPES.register(
    Decimal,
    code=DECIMAL_CODE,
    encode=lambda d: str(d).encode(),
    decode=_decimal,
    codes=BUILTIN_CODES,
)


def register_type(
    cls: type[Any],
    *,
    code: int,
    encode: Callable[[Any], bytes],
    decode: Callable[[bytes], Any],
) -> None:
    """Let values of exactly ``cls`` be task arguments and results: sent as msgpack
    extension ``code`` (32-127) holding ``encode(value)``, and made again with
    ``decode(data)`` on the other side. Register it in the module that defines the tasks
    using it, so that clients and subworkers (which both import it) agree.

    Raises ``ValueError`` for a code out of range or taken, or a type registered already.
    """
    VALUE_TYPES.register(cls, code=code, encode=encode, decode=decode)


def describe_ext(value: Ext) -> str:
    """A short text for an extension value, where one is shown (the dashboard, a JSON
    view): FastWorker's own types as their ``str``, any other as ``ext(code, N bytes)``.
    Never runs an application's ``decode``, and never raises."""
    data = bytes(value.data)
    if value.code in (UUID_CODE, DECIMAL_CODE):
        entry = VALUE_TYPES.by_code[value.code]
        with contextlib.suppress(Exception):  # bytes from anyone: fall back to the size
            return str(entry.decode(data))
    return f"ext({value.code}, {len(data)} bytes)"
