"""The journal's file format: a magic header naming the format's version, then frames,
each ``<4-byte sync marker><u32 length><u32 crc32><payload>`` (little-endian), the
payload one msgpack list of entries (see ``schema``).

Every write appends whole frames, so a power cut can only tear the last one: a damaged
frame with nothing intact after it is a torn last write, dropped on replay. A damaged
frame *followed by* intact ones is something else (a bad disk block, a stray write) and
the reader reports it rather than deciding: the caller refuses to start or salvages.

The sync marker lets the reader find the next frame after damage without trying every
byte offset (its first byte, 0xc1, is the one byte msgpack never uses as a type). The
checksum covers the frame's offset and length as well as its payload, so a frame-shaped
run of bytes inside a payload (a task's argument, say) is not taken for a real frame: it
would have to name the very offset it ends up at.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

VERSION = 2
_NAME = b"FWJRNL"
MAGIC = _NAME + b"%02d" % VERSION
SYNC = b"\xc1FWF"
HEADER = struct.Struct("<4sII")
_BOUND = struct.Struct("<QI")  # offset, length: what the checksum binds the payload to


def frame(payload: bytes, offset: int) -> bytes:
    """``payload`` as the frame that starts ``offset`` bytes into the file."""
    return HEADER.pack(SYNC, len(payload), _crc(offset, payload)) + payload


def _crc(offset: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(_BOUND.pack(offset, len(payload))))


class NotAJournal(ValueError):
    """The file does not start like a FastWorker journal (so it is not ours to cut)."""


class WrongVersion(ValueError):
    """A FastWorker journal in another format version than this code reads."""

    def __init__(self, found: int | None) -> None:
        self.found = found
        shown = "?" if found is None else found
        if found is not None and found < VERSION:
            todo = "there is no migration: move the state dir away and start on an empty one"
            who = "an older"
        else:
            todo = "run that version on it, or move the state dir away and start on an empty one"
            who = "a newer"
        super().__init__(
            f"the journal is in format {shown}, written by {who} FastWorker, and this one "
            f"reads format {VERSION} only: {todo}"
        )


@dataclass(frozen=True)
class Frame:
    offset: int
    payload: bytes

    @property
    def end(self) -> int:
        return self.offset + HEADER.size + len(self.payload)


@dataclass(frozen=True)
class Gap:
    """Damaged bytes with intact frames after them: not a torn last write."""

    offset: int
    size: int


@dataclass
class Reading:
    frames: list[Frame]  # every intact frame, in file order (also those after a gap)
    gaps: list[Gap]  # damage followed by intact frames
    good: int  # bytes up to the end of the last intact frame
    torn: int  # bytes after it: a torn last write, to be cut off

    @property
    def payloads(self) -> list[bytes]:
        return [f.payload for f in self.frames]

    def frames_after(self, gap: Gap) -> int:
        return sum(1 for f in self.frames if f.offset > gap.offset)


def read(data: bytes) -> Reading:
    """Every intact frame, and where the damage is. An empty file is a new journal."""
    if not data:
        return Reading([], [], 0, 0)
    if not data.startswith(MAGIC):
        _check_magic(data)
        return Reading([], [], 0, len(data))  # the header itself was torn: just made
    found: list[Frame] = []
    gaps: list[Gap] = []
    offset = len(MAGIC)
    while offset < len(data):
        payload = _intact_at(data, offset)
        if payload is not None:
            found.append(Frame(offset, payload))
            offset = found[-1].end
            continue
        resume = _next_intact(data, offset + 1)
        if resume is None:
            break  # nothing intact follows: a torn last write
        gaps.append(Gap(offset, resume - offset))
        offset = resume
    good = found[-1].end if found else len(MAGIC)
    return Reading(found, gaps, good, len(data) - good)


def _check_magic(data: bytes) -> None:
    """Raise unless ``data`` is the start of a header this code could have written."""
    if MAGIC.startswith(data):
        return
    if data.startswith(_NAME):
        digits = data[len(_NAME) : len(MAGIC)]
        raise WrongVersion(int(digits) if digits.isdigit() else None)
    raise NotAJournal("not a FastWorker journal (bad magic)")


def span(chunk: bytes, at: int) -> list[Frame] | None:
    """The frames ``chunk`` consists of, exactly, if it sits ``at`` bytes into a journal
    (a piece of one, as replication ships it): ``None`` unless every byte of it belongs
    to an intact frame checksummed for that very offset. A chunk at 0 starts with the
    header. Pure: the frames are checked as ``read`` checks them."""
    found: list[Frame] = []
    position = 0
    if at == 0:
        if not chunk.startswith(MAGIC):
            return None
        position = len(MAGIC)
    while position < len(chunk):
        payload = _intact_at(chunk, position, at)
        if payload is None:
            return None
        found.append(Frame(at + position, payload))
        position += HEADER.size + len(payload)
    return found


def _intact_at(data: bytes, offset: int, base: int = 0) -> bytes | None:
    """The payload of the intact frame at ``offset`` in ``data`` (which starts ``base``
    bytes into the journal: the checksum binds the frame to its place in the file)."""
    if offset + HEADER.size > len(data):
        return None
    sync, length, crc = HEADER.unpack_from(data, offset)
    start = offset + HEADER.size
    if sync != SYNC or length == 0 or start + length > len(data):
        return None
    payload = data[start : start + length]
    return payload if _crc(base + offset, payload) == crc else None


def _next_intact(data: bytes, start: int) -> int | None:
    """The offset of the first intact frame at or after ``start``, if any."""
    at = data.find(SYNC, start)
    while at != -1:
        if _intact_at(data, at) is not None:
            return at
        at = data.find(SYNC, at + 1)
    return None
