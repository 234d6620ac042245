"""The journal file: entries appended in group commits, replayed and compacted on start.

``append`` only encodes and queues; one writer task writes everything queued since its
last write in one ``write`` + ``fdatasync`` (in a thread, so the event loop keeps taking
requests meanwhile). ``flushed`` is a future for "everything appended so far is on disk":
the control plane answers a submission only once it resolves. Under load each fsync
carries thousands of tasks, which is what keeps throughput near the in-memory one.

Compaction rewrites the file as a snapshot (tmp file, fsync, rename, fsync of the
directory), at start and whenever the file has grown past its bound.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec
import structlog

from fastworker_control_plane.durability import frames
from fastworker_control_plane.durability.entries import Entry, Recovered

log = structlog.get_logger(__name__)

FILE_NAME = "journal"
LOCK_NAME = "lock"
COMPACT_BYTES = 64 * 1024 * 1024  # grown past this (and twice the last snapshot): compact


class JournalError(Exception):
    """The journal cannot be used: another process holds it, or it cannot be read or
    written (the message says which, and what to do)."""


class Journal:
    def __init__(self, directory: Path, *, compact_bytes: int = COMPACT_BYTES) -> None:
        self.directory = directory
        self.path = directory / FILE_NAME
        self.compact_bytes = compact_bytes
        self.size = 0
        self.commits = 0  # writes (fsyncs) since opened
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self._encoder = msgspec.msgpack.Encoder()
        self._pending: list[bytes] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._broken: BaseException | None = None
        self._snapshot: Callable[[], Sequence[Entry]] | None = None
        self._snapshot_size = 0
        self._closing = False

    # --- start ------------------------------------------------------------------------

    def load(self) -> tuple[Recovered, int]:
        """Lock the directory and replay the journal; returns the state and the bytes of
        torn tail dropped. Raises ``JournalError`` if it cannot."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.close_files()
            raise JournalError(
                f"{self.directory} is in use by another control plane (each needs its own "
                "--state-dir)"
            ) from None
        except OSError as exc:
            self.close_files()
            raise JournalError(f"cannot use {self.directory} as the state dir: {exc}") from exc
        try:
            reading = frames.read(self.path.read_bytes() if self.path.exists() else b"")
        except (OSError, frames.NotAJournal) as exc:
            self.close_files()
            raise JournalError(f"cannot read the journal {self.path}: {exc}") from exc
        recovered = Recovered()
        decoder = msgspec.msgpack.Decoder(list[Entry])
        for index, payload in enumerate(reading.payloads):
            try:
                entries = decoder.decode(payload)
            except msgspec.DecodeError as exc:
                self.close_files()
                raise JournalError(
                    f"the journal {self.path} has an intact frame ({index}) this version "
                    f"cannot read ({exc}): was it written by a newer FastWorker?"
                ) from exc
            for entry in entries:
                recovered.apply(entry)
        if reading.torn:
            log.warning(
                "journal: dropped a torn last write", path=str(self.path), bytes=reading.torn
            )
        return recovered, reading.torn

    def rewrite(self, entries: Sequence[Entry]) -> None:
        """Replace the journal with ``entries`` atomically, and append after them."""
        data = frames.MAGIC + (
            frames.frame(self._encoder.encode(list(entries))) if entries else b""
        )
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self.size = self._snapshot_size = len(data)

    def start(self, snapshot: Callable[[], Sequence[Entry]]) -> None:
        """Begin writing; ``snapshot`` gives the whole state when it is time to compact."""
        self._snapshot = snapshot
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    # --- appending ---------------------------------------------------------------------

    def append(self, entries: list[Entry]) -> None:
        if entries and self._broken is None:
            self._pending.append(frames.frame(self._encoder.encode(entries)))
            self._wake.set()

    def flushed(self) -> asyncio.Future[None]:
        """Resolves once everything appended so far is on disk (or raises
        ``JournalError`` if it could not be written)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._broken is not None:
            future.set_exception(JournalError(f"the journal cannot be written: {self._broken}"))
            return future
        self._waiters.append(future)
        self._wake.set()
        return future

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while (self._pending or self._waiters) and await self._commit():
                pass
            if self._closing:
                return
            if self.size > max(self.compact_bytes, 2 * self._snapshot_size):
                await self._compact()

    async def _commit(self) -> bool:
        """Write what is pending and tell its waiters; ``False`` if the write failed (the
        data stays pending, ahead of anything newer, for the next commit to retry)."""
        data, waiters = b"".join(self._pending), self._waiters
        self._pending, self._waiters = [], []
        error: BaseException | None = self._broken
        if data and error is None:
            try:
                await asyncio.to_thread(self._write, data)
                self.commits += 1
            except OSError as exc:
                error = exc
                self._pending.insert(0, data)
                log.error("journal write failed", path=str(self.path), error=str(exc))
        for waiter in waiters:
            if waiter.done():
                continue
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(JournalError(f"the journal cannot be written: {error}"))
        return error is None

    def _write(self, data: bytes) -> None:
        assert self._fd is not None, "rewrite() opens the file"
        try:
            _write_all(self._fd, data)
            os.fdatasync(self._fd)
        except OSError:
            try:  # cut the partial frame, so later frames are not lost behind it on replay
                os.ftruncate(self._fd, self.size)
            except OSError as exc:
                self._broken = exc
            raise
        self.size += len(data)

    async def _compact(self) -> None:
        assert self._snapshot is not None
        entries = self._snapshot()  # taken between commits: nothing appended is missing
        before = self.size
        try:
            await asyncio.to_thread(self.rewrite, entries)
        except OSError as exc:
            log.error("journal compaction failed", path=str(self.path), error=str(exc))
            self._snapshot_size = self.size  # retry once it has doubled again
            return
        log.info("journal compacted", path=str(self.path), before=before, after=self.size)

    # --- stop ----------------------------------------------------------------------------

    async def close(self) -> None:
        """Write what is pending, then release the files."""
        if self._writer is not None:
            self._closing = True
            self._wake.set()
            await asyncio.gather(self._writer, return_exceptions=True)
            self._writer = None
        self.close_files()

    def close_files(self) -> None:
        for fd in (self._fd, self._lock_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._lock_fd = None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
