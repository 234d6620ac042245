# msgspec's frozen=True is inherited; mypy's dataclass model does not know that:
# mypy: disable-error-code="misc"
"""The replication stream's messages: what a leader and a follower say to each other.

Each is a msgpack map ``{"op": <tag>, "v": 1, <fields>...}``; unknown fields are ignored,
so a field can be added without a new ``STREAM_VERSION`` (bump it for anything else).

A log is one incarnation of the leader's journal file, named by ``log_id`` (16 random
bytes, new whenever the leader opens or rewrites its file: compaction, a restart, a new
leader). Offsets are byte offsets in that file, and the bytes shipped are the file's own,
frames and checksums included (a frame's checksum binds it to its offset, so a mirror
must hold it at the same offset: the follower's journal is a byte-exact prefix of the
leader's). A random id per incarnation means a follower never appends to a file that is
not a prefix of the leader's: any doubt costs a snapshot, never a divergent journal.

Leader to follower: ``Hello`` (a session starts), ``Append`` (frames at an offset; empty
data is a heartbeat), ``Snapshot`` (a log's bytes from 0, for a follower on another log).
Follower to leader: ``Ack`` (its position, after its fdatasync; also what it wants next)
or ``Refused`` (a stale epoch or an unknown version). Every follower message says where
it is, so the leader's next message to it starts there: a lost or rejected message costs
one round trip, never a gap.

This module must never import the rest of the control plane: it is the wire spec.
"""

from __future__ import annotations

from typing import Final

import msgspec

STREAM_VERSION: Final = 1
LOG_ID_BYTES: Final = 16


class Message(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="op", forbid_unknown_fields=False
):
    v: int = STREAM_VERSION
    epoch: int  # the sender's term (a follower: the highest it has seen)


class Hello(Message, tag="hello"):
    """A leader starts a session: its term, its log and how much of it is durable.
    ``refused``: why it sends nothing of its log (``UNAUTHORIZED``: the follower's token)."""

    log_id: bytes
    size: int
    refused: str = ""


# Why a leader refused a follower (stable codes).
UNAUTHORIZED = "unauthorized"  # the follower lacks the control planes' shared token


class Append(Message, tag="append"):
    """``data``: whole frames of ``log_id`` from ``offset``, exactly as in the leader's
    file; ``size``: the leader's durable size (how far behind the follower is)."""

    log_id: bytes
    offset: int
    data: bytes
    size: int


class Snapshot(Message, tag="snapshot"):
    """A piece of ``log_id`` from ``offset`` (0 starts with the file's header), in whole
    frames. The follower stages the pieces aside and installs them as its journal once
    they reach ``size``, the leader's durable size when it sent the last one."""

    log_id: bytes
    offset: int
    data: bytes
    size: int


# Why an Ack says the last message did not fit (stable codes, for logs and metrics).
FIT = ""
OTHER_LOG = "other_log"  # not the log the follower holds: it needs a snapshot
GAP = "gap"  # does not start at the follower's durable offset
CHECKSUM = "checksum"  # not whole, intact frames for that offset (torn, corrupt)


class Ack(Message, tag="ack"):
    """Everything of ``log_id`` up to ``durable`` is synced on the follower's disk
    (``log_id`` empty: it holds nothing). ``staging``/``staged``: a snapshot of that log
    is being received, this many bytes so far. ``why``: the last message did not fit.
    ``replica``: the follower's name (for the leader's lag metrics and in-sync set)."""

    log_id: bytes
    durable: int
    staging: bytes = b""
    staged: int = 0
    why: str = FIT
    replica: str = ""
    auth: str = ""  # the control planes' shared token, when they have one


# Why a follower refused (stable codes).
STALE_EPOCH = "stale_epoch"
VERSION = "version"


class Refused(Message, tag="refused"):
    """The follower takes nothing from this sender: its epoch is older than ``epoch``
    (the highest the follower has seen; the sender is no longer leader), or it speaks a
    stream version the follower does not."""

    reason: str
    replica: str = ""
    auth: str = ""


LeaderMessage = Hello | Append | Snapshot
FollowerMessage = Ack | Refused
AnyMessage = Hello | Append | Snapshot | Ack | Refused

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AnyMessage)


def encode(message: AnyMessage) -> bytes:
    return _encoder.encode(message)


def decode(data: bytes) -> AnyMessage:
    """Raises ``msgspec.DecodeError`` (a ``ValueError``) for bytes that are not one."""
    message: AnyMessage = _decoder.decode(data)
    return message
