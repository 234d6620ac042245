"""Entries to bytes: a commit's payload, or a whole snapshot file.

Encoding never fails as a whole: an entry that cannot be encoded (an argument nested too
deeply for the encoder, say) is logged and left out, and the others are written. One
task must never cost the journal every other change that rode in its batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import structlog

from fastworker_control_plane.durability import frames
from fastworker_control_plane.durability.schema import Dead, Done, Entry, Put, Step

log = structlog.get_logger(__name__)

SNAPSHOT_FRAME = 1000  # entries per frame of a snapshot: damage costs one frame, not all


def snapshot_file(entries: Sequence[Entry]) -> bytes:
    """A whole journal holding ``entries`` (in frames of ``SNAPSHOT_FRAME``)."""
    data = bytearray(frames.MAGIC)
    encoder = msgspec.msgpack.Encoder()  # its own: compaction runs in a thread
    for at in range(0, len(entries), SNAPSHOT_FRAME):
        payload = encoded(encoder, entries[at : at + SNAPSHOT_FRAME])
        if payload is not None:
            data += frames.frame(payload, len(data))
    return bytes(data)


def encoded(encoder: msgspec.msgpack.Encoder, entries: Sequence[Entry]) -> bytes | None:
    """``entries`` as one msgpack list, leaving out (and logging) any that cannot be
    encoded (too deeply nested, say): one entry's failure must not take the rest down.
    ``None`` if none can be."""
    try:
        return encoder.encode(entries)
    except Exception:  # whichever it is (RecursionError, TypeError...): find the entry
        pass
    pieces = []
    for entry in entries:
        try:
            pieces.append(encoder.encode(entry))
        except Exception as exc:  # any failure is this entry's alone
            log.error(
                "journal: an entry cannot be encoded; it is not written (the rest are)",
                entry=type(entry).__name__.lower(),
                task_id=_task_id(entry),
                error=f"{type(exc).__name__}: {exc}",
            )
    if not pieces:
        return None
    return _array_header(len(pieces)) + b"".join(pieces)


def _task_id(entry: Entry) -> str | None:
    match entry:
        case Put(task=task) | Done(task=task):
            return task.id
        case Step(task_id=task_id):
            return task_id
        case Dead(letter=letter):
            return letter.id
    return None


def _array_header(length: int) -> bytes:
    """The msgpack header of a list of ``length`` items (joined from encoded pieces, so
    no item is encoded a second time, one level deeper)."""
    if length < 16:
        return bytes([0x90 | length])
    if length < 1 << 16:
        return b"\xdc" + length.to_bytes(2, "big")
    return b"\xdd" + length.to_bytes(4, "big")
