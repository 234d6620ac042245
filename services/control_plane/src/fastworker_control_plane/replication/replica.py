"""A follower's state dir: a byte-exact mirror of the leader's journal, and what the
follower must not forget (the highest epoch seen, the log its journal holds). It
carries out ``follower``'s instructions with real files; the deciding is done there.

The mirror is an ordinary journal file: when this follower is promoted, ``close`` it
and open the directory with ``Journal`` as any control plane does. Until then it holds
the state dir's lock, so no control plane can start on it by mistake.

Every byte written was checked as it arrived (whole frames, each checksum bound to its
offset), so the mirror always replays: ``recovered`` replays it on demand, the state a
promotion starts from. Nothing is decoded on the way in: a follower's work per commit is
a checksum, a write and an fdatasync, and installing a snapshot is a sync and a rename,
so a follower sent a snapshot after a compaction is back in sync quickly.

Ordering is what makes it crash-safe: an Ack is only returned after the bytes it
covers are fdatasynced; a snapshot is synced before it replaces the journal, and the
log name is cleared before the swap and set after it, so a crash in between leaves "no
log" (a snapshot again), never the new file under the old log's name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import msgspec

from fastworker_control_plane.durability import files, frames
from fastworker_control_plane.durability.entries import Recovered
from fastworker_control_plane.durability.errors import JournalError
from fastworker_control_plane.durability.journal import FILE_NAME, LOCK_NAME
from fastworker_control_plane.durability.replay import replay
from fastworker_control_plane.replication import messages as m
from fastworker_control_plane.replication.follower import (
    Follower,
    Install,
    Instruction,
    Persist,
    Reply,
    Stage,
    Write,
)

STATE_NAME = "replica"
STAGED_NAME = "journal.staged"


class Seen(msgspec.Struct, omit_defaults=True):
    epoch: int = 0
    log_id: bytes = b""


class Replica:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / FILE_NAME
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self._staged_fd: int | None = None
        self.size = 0

    def open(self) -> Follower:
        """Lock the directory and read where the mirror is (a torn tail is cut; a
        damaged mirror is dropped: the leader will send a snapshot). Raises
        ``JournalError`` if the directory is in use or unreadable."""
        try:
            self._lock_fd = files.lock(self.directory, LOCK_NAME)
        except OSError as exc:
            raise JournalError(f"cannot use {self.directory} as a replica: {exc}") from exc
        seen = self._seen()
        data = self.path.read_bytes() if self.path.exists() else b""
        try:
            keep = replay(self.path, data).good
        except JournalError:  # damage inside: not ours to salvage, the leader has it all
            keep, seen.log_id = 0, b""
        if keep == 0:
            seen.log_id = b""
        self._fd, self.size = files.append_after(self.path, keep, frames.MAGIC)
        files.remove(self.directory / STAGED_NAME)
        return Follower(epoch=seen.epoch, log_id=seen.log_id, durable=self.size)

    @property
    def recovered(self) -> Recovered:
        """The state the mirror replays to (read from disk: call it rarely)."""
        return replay(self.path, self.path.read_bytes()).recovered

    def carry_out(self, instructions: Sequence[Instruction]) -> m.Ack | m.Refused | None:
        """Do each instruction in order; returns the reply to send once all are done.
        An ``OSError`` stops here, before the reply: re-``open`` to go on."""
        reply: m.Ack | m.Refused | None = None
        for instruction in instructions:
            match instruction:
                case Persist(epoch=epoch, log_id=log_id):
                    files.replace(
                        self.directory / STATE_NAME, msgspec.msgpack.encode(Seen(epoch, log_id))
                    )
                    files.sync_directory(self.directory)
                case Write(offset=offset, data=data):
                    self._write(offset, data)
                case Stage(offset=offset, data=data):
                    self._stage(offset, data)
                case Install(size=size):
                    self._install(size)
                case Reply(message=message):
                    reply = message
        return reply

    def close(self) -> None:
        for fd in (self._fd, self._staged_fd, self._lock_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._staged_fd = self._lock_fd = None

    def _seen(self) -> Seen:
        try:
            return msgspec.msgpack.decode((self.directory / STATE_NAME).read_bytes(), type=Seen)
        except (OSError, msgspec.DecodeError):
            return Seen()  # nothing seen yet (or unreadable: a snapshot sets it again)

    def _persist(self, seen: Seen) -> None:
        files.replace(self.directory / STATE_NAME, msgspec.msgpack.encode(seen))
        files.sync_directory(self.directory)

    def _write(self, offset: int, data: bytes) -> None:
        assert self._fd is not None, "open() opens the file"
        assert offset == self.size, "the follower checked the offset"
        files.write_all(self._fd, data)
        files.sync_data(self._fd)
        self.size += len(data)

    def _stage(self, offset: int, data: bytes) -> None:
        if offset == 0:
            if self._staged_fd is not None:
                os.close(self._staged_fd)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            self._staged_fd = os.open(self.directory / STAGED_NAME, flags, 0o600)
        assert self._staged_fd is not None, "a snapshot starts at 0"
        files.write_all(self._staged_fd, data)

    def _install(self, size: int) -> None:
        assert self._staged_fd is not None
        os.fsync(self._staged_fd)
        os.close(self._staged_fd)
        self._staged_fd = None
        os.replace(self.directory / STAGED_NAME, self.path)
        files.sync_directory(self.directory)
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self.size = files.append_after(self.path, size, frames.MAGIC)


def remember_epoch(directory: Path, epoch: int) -> None:
    """A replica about to lead records its term, holding no log of anyone's: when it
    follows again it refuses older terms and is sent a snapshot (its journal, written
    as leader, is not a prefix of any other leader's)."""
    files.replace(directory / STATE_NAME, msgspec.msgpack.encode(Seen(epoch, b"")))
    files.sync_directory(directory)
