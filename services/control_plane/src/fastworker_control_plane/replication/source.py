"""The leader's journal file, read back in whole frames for shipping to followers.

It reads the file the journal writes, through its own descriptor, and only up to a size
the caller knows to be durable (``Journal.size`` after a commit), so it ships nothing
the leader has not fsynced and never a frame being written. A rewrite (compaction)
replaces the file: ``follow`` notices the new file and names it a new log. A snapshot
being read from the old file stays consistent meanwhile (its descriptor keeps the old
file), but it is of a log followers can no longer append to, so it starts again.

A log's name is random, new for each file this process opens: a follower's mirror of
any other file, even of this leader before a restart, is answered with a snapshot.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from fastworker_control_plane.durability import frames
from fastworker_control_plane.replication.messages import LOG_ID_BYTES

CHUNK = 1024 * 1024  # bytes per message, at most (a bigger frame goes whole, alone)


def whole(data: bytes, at: int) -> int:
    """How many bytes of ``data`` (read from offset ``at``) are whole frames (by their
    lengths: the follower checks the checksums)."""
    position = len(frames.MAGIC) if at == 0 else 0
    while position + frames.HEADER.size <= len(data):
        _, length, _ = frames.HEADER.unpack_from(data, position)
        end = position + frames.HEADER.size + length
        if end > len(data):
            break
        position = end
    return min(position, len(data))


class LeaderLog:
    def __init__(
        self, path: Path, new_id: Callable[[], bytes] = lambda: os.urandom(LOG_ID_BYTES)
    ) -> None:
        self.path = path
        self.log_id = b""
        self._new_id = new_id
        self._fd: int | None = None
        self._file: tuple[int, int] | None = None

    def follow(self) -> bool:
        """Open the journal file if it is not the one open; True if the log changed."""
        status = os.stat(self.path)
        if self._file == (status.st_dev, status.st_ino):
            return False
        fd = os.open(self.path, os.O_RDONLY)
        opened = os.fstat(fd)
        self.close()
        self._fd, self._file = fd, (opened.st_dev, opened.st_ino)
        self.log_id = self._new_id()
        return True

    def read(self, offset: int, size: int, limit: int = CHUNK) -> bytes:
        """Whole frames from ``offset``, up to ``size`` (durable) and about ``limit``
        bytes (at least one whole frame, however big, if any is there)."""
        assert self._fd is not None, "follow() opens the file"
        wanted = min(limit, size - offset)
        if wanted <= 0:
            return b""
        data = os.pread(self._fd, wanted, offset)
        cut = whole(data, offset)
        header = len(frames.MAGIC) if offset == 0 else 0
        if cut <= header and offset + header < size:  # no whole frame fits in ``limit``
            head = os.pread(self._fd, frames.HEADER.size, offset + header)
            if len(head) == frames.HEADER.size:
                _, length, _ = frames.HEADER.unpack_from(head)
                first = header + frames.HEADER.size + length
                data = os.pread(self._fd, min(size - offset, first), offset)
                cut = whole(data, offset)
        return data[:cut]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = self._file = None
