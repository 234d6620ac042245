"""The one msgpack codec: typed messages to bytes and back.

Decoding never raises anything but :class:`~fastworker_protocol.errors.DecodeError`
subclasses, whatever the bytes: that is what lets a server answer garbage with an error
reply and keep serving. Nothing decoded is ever executed, imported or unpickled; msgpack
extension types arrive as inert ``msgspec.msgpack.Ext`` values.
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
from fastworker_protocol.messages import OPS, PROTOCOL_VERSION, AnyMessage, Message

DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024

M = TypeVar("M", bound=Message)


class Codec:
    """Encodes and decodes messages, rejecting frames over ``max_message_size`` bytes."""

    def __init__(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        if max_message_size <= 0:
            raise ValueError("max_message_size must be positive")
        self.max_message_size = max_message_size
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(AnyMessage)

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
        if message.v != PROTOCOL_VERSION:
            raise UnsupportedVersion(_unsupported(message.v))
        return message

    def decode_as(self, data: bytes, expected: type[M]) -> M:
        """Decode a message that must be of type ``expected`` (for replies)."""
        message = self.decode(data)
        if not isinstance(message, expected):
            raise InvalidMessage(f"expected {_op(expected)!r}, got {_op(type(message))!r}")
        return message


def _op(message_type: type[Message]) -> str:
    return str(message_type.__struct_config__.tag)


def _explain_invalid(data: bytes, exc: msgspec.ValidationError) -> DecodeError:
    """Tell an unknown ``op`` apart from a known op with bad fields (error path only)."""
    try:
        raw: Any = msgspec.msgpack.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, MemoryError) as err:
        return MalformedMessage(f"not a msgpack message: {err}")  # e.g. a map as a map key
    if not isinstance(raw, dict):
        return InvalidMessage(f"a message must be a map, got {type(raw).__name__}")
    version = raw.get("v", PROTOCOL_VERSION)
    if type(version) is int and version != PROTOCOL_VERSION:  # a non-int `v` is just invalid
        return UnsupportedVersion(_unsupported(version))
    op = raw.get("op")
    if op is None:
        return InvalidMessage("message has no 'op' field")
    if not isinstance(op, str) or op not in OPS:
        return UnknownOp(f"unknown op {op!r}")
    return InvalidMessage(f"invalid {op!r} message: {exc}")


def _unsupported(version: object) -> str:
    return f"protocol version {version!r} is not supported (this peer speaks {PROTOCOL_VERSION})"


def message_op(message: Message | type[Message]) -> str:
    """The ``op`` tag of a message or message type."""
    return _op(message if isinstance(message, type) else type(message))
