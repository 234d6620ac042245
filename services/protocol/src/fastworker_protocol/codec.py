"""The one msgpack codec: typed messages to bytes and back.

Decoding never raises anything but :class:`~fastworker_protocol.errors.DecodeError`
subclasses, whatever the bytes: that is what lets a server answer garbage with an error
reply and keep serving. Nothing decoded is ever executed, imported or unpickled; msgpack
extension types arrive as inert ``msgspec.msgpack.Ext`` values, unless the codec is a
client's (``decode_values``): then those of a registered type are made by its ``decode``.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from fastworker_protocol.errors import (
    DecodeError,
    EncodeError,
    InvalidMessage,
    MalformedMessage,
    OversizeMessage,
    UnknownOp,
    UnsupportedVersion,
)
from fastworker_protocol.messages import PROTOCOL_VERSION, Message
from fastworker_protocol.union import OPS, AnyMessage
from fastworker_protocol.value_types import VALUE_TYPES, ValueTypeError

DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024

M = TypeVar("M", bound=Message)


def _str_subclass(value: Any) -> Any:
    """A ``str`` subclass where the protocol has a string (a task handle given where an id
    goes) is sent as its text; anything else msgpack cannot encode stays refused."""
    if isinstance(value, str):
        return str.__str__(value)
    raise TypeError(f"Encoding objects of type {type(value).__qualname__} is unsupported")


class Codec:
    """Encodes and decodes messages, rejecting frames over ``max_message_size`` bytes."""

    def __init__(
        self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, *, decode_values: bool = False
    ) -> None:
        """``decode_values``: turn extension values of registered types (``value_types``)
        back into their types, as a client reading results does; without it they stay
        opaque, as the control plane carries them."""
        if max_message_size <= 0:
            raise ValueError("max_message_size must be positive")
        self.max_message_size = max_message_size
        self._encoder = msgspec.msgpack.Encoder(enc_hook=_str_subclass)
        hook = VALUE_TYPES.ext_hook if decode_values else None
        self._decoder = msgspec.msgpack.Decoder(AnyMessage, ext_hook=hook)
        self._envelope = msgspec.msgpack.Decoder(_Envelope)

    def encode(self, message: Message) -> bytes:
        try:
            data = self._encoder.encode(message)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise EncodeError(f"cannot encode {type(message).__name__}: {exc}") from exc
        if len(data) > self.max_message_size:
            raise EncodeError(
                f"{type(message).__name__} is {len(data)} bytes, over the "
                f"{self.max_message_size}-byte limit"
            )
        return data

    def decode(self, data: bytes) -> Message:
        if len(data) > self.max_message_size:
            raise OversizeMessage(
                f"message of {len(data)} bytes is over the {self.max_message_size}-byte limit"
            )
        try:
            message: Message = self._decoder.decode(data)
        except msgspec.ValidationError as exc:
            raise _explain_invalid(data, exc) from None
        except (msgspec.DecodeError, RecursionError, MemoryError) as exc:
            raise MalformedMessage(f"not a msgpack message: {exc}") from None
        except ValueTypeError as exc:  # a registered type's decode refused its bytes
            raise InvalidMessage(str(exc)) from exc
        if message.v != PROTOCOL_VERSION:
            raise UnsupportedVersion(_unsupported(message.v))
        return message

    def auth_of(self, data: bytes) -> str | None:
        """The top-level ``auth`` of a frame, read before anything else about it is looked
        at (size, version, op, fields): ``None`` when the frame is not a msgpack map or has
        no string ``auth``. Never raises."""
        try:
            return self._envelope.decode(data).auth
        except (msgspec.DecodeError, RecursionError, MemoryError):
            return None

    def decode_as(self, data: bytes, expected: type[M]) -> M:
        """Decode a message that must be of type ``expected`` (for replies)."""
        message = self.decode(data)
        if not isinstance(message, expected):
            raise InvalidMessage(f"expected {_op(expected)!r}, got {_op(type(message))!r}")
        return message


class _Envelope(msgspec.Struct, forbid_unknown_fields=False):
    """Only what is read of a request before it is validated: every other field is skipped."""

    auth: str | None = None


class _Head(msgspec.Struct, forbid_unknown_fields=False):
    """What says which rejection an invalid frame gets, left raw so that no bad value
    elsewhere in the frame (or in them) can hide them."""

    op: msgspec.Raw = msgspec.Raw(b"\xc0")  # nil
    v: msgspec.Raw = msgspec.Raw(b"\x01")


def _op(message_type: type[Message]) -> str:
    return str(message_type.__struct_config__.tag)


def _explain_invalid(data: bytes, exc: msgspec.ValidationError) -> DecodeError:
    """Tell an unknown ``op`` apart from a known op with bad fields (error path only).

    Only ``op`` and ``v`` are looked at: a bad value elsewhere (a timestamp past 9999, a
    map as a map key) is the known op's ``invalid_message``, saying where it is.
    """
    try:
        head = _HEAD.decode(data)
    except msgspec.ValidationError:  # well-formed, but not a map with string keys
        return _explain_odd(data, exc)
    except (msgspec.DecodeError, RecursionError, MemoryError) as err:
        return MalformedMessage(f"not a msgpack message: {err}")
    return _explain(_value(head.op), _value(head.v), exc)


def _explain_odd(data: bytes, exc: msgspec.ValidationError) -> DecodeError:
    """The same rules, for a frame whose top level has keys that are not strings."""
    try:
        raw: Any = msgspec.msgpack.decode(data)
    except (msgspec.DecodeError, RecursionError, MemoryError) as err:
        return MalformedMessage(f"not a msgpack message: {err}")  # e.g. a map as a map key
    if not isinstance(raw, dict):
        return InvalidMessage(f"a message must be a map, got {type(raw).__name__}")
    return _explain(raw.get("op"), raw.get("v", PROTOCOL_VERSION), exc)


def _explain(op: Any, version: Any, exc: msgspec.ValidationError) -> DecodeError:
    if type(version) is int and version != PROTOCOL_VERSION:  # a non-int `v` is just invalid
        return UnsupportedVersion(_unsupported(version))
    if op is None:
        return InvalidMessage("message has no 'op' field")
    if not isinstance(op, str) or op not in OPS:
        return UnknownOp(f"unknown op {op!r}")
    problem = str(exc)
    if problem.startswith(_MSGSPEC_TIMESTAMP):  # say the range, not just that there is one
        where = problem.removeprefix(_MSGSPEC_TIMESTAMP).strip()  # "- at `$...`"
        problem = f"{_TIMESTAMP_RANGE} {where}".rstrip()
    return InvalidMessage(f"invalid {op!r} message: {problem}")


_MSGSPEC_TIMESTAMP = "Timestamp is out of range"
_TIMESTAMP_RANGE = (
    "a msgpack timestamp must be from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z "
    "(it is read as a Python datetime, to the microsecond)"
)


def _value(raw: msgspec.Raw) -> Any:
    """One field's value, or a stand-in that matches no rule if it cannot be decoded."""
    try:
        return msgspec.msgpack.decode(raw)
    except (msgspec.DecodeError, RecursionError, MemoryError):
        return _UNREADABLE


class _Unreadable:
    def __repr__(self) -> str:
        return "(a value that does not decode)"


_UNREADABLE = _Unreadable()
_HEAD = msgspec.msgpack.Decoder(_Head)


def _unsupported(version: object) -> str:
    return f"protocol version {version!r} is not supported (this peer speaks {PROTOCOL_VERSION})"


def message_op(message: Message | type[Message]) -> str:
    """The ``op`` tag of a message or message type."""
    return _op(message if isinstance(message, type) else type(message))
