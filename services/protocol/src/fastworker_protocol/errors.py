"""Stable wire error codes and the protocol's exception tree.

Codes are part of the wire contract: once published, a code keeps its meaning forever.
``DecodeError`` and its children mean *the peer* sent something bad; ``EncodeError`` means
*we* were asked to send something that cannot go on the wire.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    MALFORMED = "malformed"  # bytes are not msgpack, or are truncated
    OVERSIZE = "oversize"  # frame larger than the receiver's limit
    INVALID_MESSAGE = "invalid_message"  # msgpack, but not a well-formed message
    UNKNOWN_OP = "unknown_op"  # op not defined by this protocol version
    WRONG_PORT = "wrong_port"  # op is defined, but not served on this socket
    UNSUPPORTED_VERSION = "unsupported_version"  # `v` is not one this peer speaks
    UNKNOWN_TASK = "unknown_task"  # no subworker ever registered this task name
    INVALID_ARGUMENTS = "invalid_arguments"  # args/kwargs do not fit the task's signature
    TASK_NOT_FOUND = "task_not_found"  # no such task id (never existed, or expired)
    UNKNOWN_WORKER = "unknown_worker"  # worker id not registered (control plane restarted?)
    SHUTTING_DOWN = "shutting_down"  # the control plane is stopping and takes no new work
    UNAUTHORIZED = "unauthorized"  # the request lacks the control plane's auth token
    QUEUE_FULL = "queue_full"  # the priority is at its bound of live tasks; retry later
    # Not the leader (any more), or too few replicas in sync under --require-sync: the
    # request took no effect here; discover the leader and retry.
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal"  # a bug on the replying side; the request may be retried


class ProtocolError(Exception):
    """Root of everything the protocol package raises."""

    code: ErrorCode = ErrorCode.INTERNAL


class EncodeError(ProtocolError):
    """A value we were asked to send cannot be encoded (unsupported type, too large)."""

    code = ErrorCode.INVALID_MESSAGE


class DecodeError(ProtocolError):
    """Bytes from a peer are not an acceptable message."""

    code = ErrorCode.MALFORMED


class MalformedMessage(DecodeError):
    code = ErrorCode.MALFORMED


class OversizeMessage(DecodeError):
    code = ErrorCode.OVERSIZE


class InvalidMessage(DecodeError):
    code = ErrorCode.INVALID_MESSAGE


class UnknownOp(DecodeError):
    code = ErrorCode.UNKNOWN_OP


class UnsupportedVersion(DecodeError):
    code = ErrorCode.UNSUPPORTED_VERSION
