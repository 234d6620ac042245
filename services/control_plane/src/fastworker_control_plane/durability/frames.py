"""The journal's file format: a magic header, then frames, each
``<u32 length><u32 crc32><payload>`` (little-endian), the payload one msgpack list of
entries. Every write appends whole frames, so a power cut can only tear the last one;
a reader stops at the first frame that is short or fails its checksum.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

MAGIC = b"FWJRNL01"
_HEADER = struct.Struct("<II")


def frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


class NotAJournal(ValueError):
    """The file does not start like a FastWorker journal (so it is not ours to cut)."""


@dataclass
class Reading:
    payloads: list[bytes]
    good: int  # bytes up to the end of the last intact frame
    torn: int  # bytes after it: a torn or corrupt tail, to be cut off


def read(data: bytes) -> Reading:
    """Every intact frame's payload, up to the first bad one. An empty file is a new one."""
    if not data:
        return Reading([], 0, 0)
    if not data.startswith(MAGIC):
        if MAGIC.startswith(data):  # the header itself was torn: the file was just made
            return Reading([], 0, len(data))
        raise NotAJournal("not a FastWorker journal (bad magic)")
    payloads = list(_frames(data))
    good = len(MAGIC) + sum(_HEADER.size + len(p) for p in payloads)
    return Reading(payloads, good, len(data) - good)


def _frames(data: bytes) -> Iterator[bytes]:
    offset = len(MAGIC)
    while offset + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, offset)
        start, end = offset + _HEADER.size, offset + _HEADER.size + length
        if end > len(data):
            return
        payload = data[start:end]
        if zlib.crc32(payload) != crc:
            return
        yield payload
        offset = end
