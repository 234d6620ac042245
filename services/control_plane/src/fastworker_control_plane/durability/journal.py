"""The journal file: entries appended in group commits, replayed on start, compacted by
the writer. ``append`` only encodes and queues; one writer task writes everything queued since its
last write in one ``write`` + ``fdatasync`` (in a thread, so the event loop keeps taking
requests meanwhile). ``flushed`` is a future for "everything appended so far is on disk":
the control plane answers a submission only once it resolves. Under load each fsync
carries thousands of tasks, which is what keeps throughput near the in-memory one.

Start needs no free space: the journal is replayed and appended to where its intact part
ends (a torn last write is cut off in place). Compaction, which rewrites the file as a
snapshot and so needs room for a second copy, is the writer's job: soon after start and
whenever the file has grown past its bound, and again later if the disk was full.

A write that fails (a full disk) fails the acknowledgements waiting on it, keeps its data
for the next commit, and is retried every ``RETRY_INTERVAL`` on its own; ``problem`` says
why until a commit succeeds. If the writer itself dies, ``fail`` makes every wait, now
and later, raise ``JournalError`` instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec
import structlog

from fastworker_control_plane.durability import encoding, files, frames
from fastworker_control_plane.durability.errors import JournalError
from fastworker_control_plane.durability.replay import Replayed, replay
from fastworker_control_plane.durability.schema import Entry

__all__ = ["Journal", "JournalError"]

log = structlog.get_logger(__name__)

FILE_NAME = "journal"
LOCK_NAME = "lock"
COMPACT_BYTES = 64 * 1024 * 1024  # grown past this (and twice the last snapshot): compact
RETRY_INTERVAL = 1.0  # seconds between retries of a failed write, with nothing new to add


class Journal:
    def __init__(self, directory: Path, *, compact_bytes: int = COMPACT_BYTES) -> None:
        self.directory = directory
        self.path = directory / FILE_NAME
        self.compact_bytes = compact_bytes
        self.size = 0
        self.commits = 0  # writes (fsyncs) since opened
        self.problem: str | None = None  # why the last commit failed, until one succeeds
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self._encoder = msgspec.msgpack.Encoder()
        self._pending: list[bytes] = []  # payloads, framed when written (frames know offsets)
        self._waiters: list[asyncio.Future[None]] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._broken: BaseException | None = None
        self._snapshot: Callable[[], Sequence[Entry]] | None = None
        self._snapshot_size = 0
        self._compact_soon = False
        self._replayed = Replayed()
        self._closing = False
        # Told after each commit (the new size, how many frames it wrote) and each
        # rewrite (the new size), on the event loop: replication ships what they cover.
        self.on_commit: Callable[[int, int], None] | None = None
        self.on_rewrite: Callable[[int], None] | None = None

    # --- start ------------------------------------------------------------------------

    def load(self, *, salvage: bool = False) -> Replayed:
        """Lock the directory and replay the journal, changing nothing on disk. Raises
        ``JournalError`` if it cannot, or if it is damaged and ``salvage`` is off."""
        try:
            self._lock_fd = files.lock(self.directory, LOCK_NAME)
        except BlockingIOError:
            raise JournalError(
                f"{self.directory} is in use by another control plane (each needs its own "
                "--state-dir)"
            ) from None
        except OSError as exc:
            raise JournalError(f"cannot use {self.directory} as the state dir: {exc}") from exc
        try:
            data = self.path.read_bytes() if self.path.exists() else b""
            self._replayed = replay(self.path, data, salvage=salvage)
        except OSError as exc:
            self.close_files()
            raise JournalError(f"cannot read the journal {self.path}: {exc}") from exc
        except JournalError:
            self.close_files()
            raise
        if self._replayed.torn:
            log.warning(
                "journal: dropped a torn last write", path=str(self.path), bytes=self._replayed.torn
            )
        return self._replayed

    def start(self, snapshot: Callable[[], Sequence[Entry]]) -> asyncio.Task[None]:
        """Open the replayed journal for appending and start the writer (its task is
        returned, to be supervised); ``snapshot`` gives the whole state to compact to.
        Raises ``OSError`` if the file cannot be opened."""
        self._snapshot = snapshot
        files.remove(files.temporary(self.path))  # a compaction cut short: free its space
        if self._replayed.skipped:
            aside = files.set_aside(self.path)
            log.warning("journal: the damaged journal is kept aside", path=str(aside))
            self.rewrite(snapshot())  # the damage must not stay in the file appended to
        else:
            self._resume()
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())
        return self._writer

    def _resume(self) -> None:
        """Append after the intact part: a torn tail is cut in place, needing no space."""
        self._fd, self.size = files.append_after(self.path, self._replayed.good, frames.MAGIC)
        self._compact_soon = self._replayed.frames > 0

    def rewrite(self, entries: Sequence[Entry]) -> None:
        """Replace the journal with ``entries`` atomically, and append after them."""
        data = encoding.snapshot_file(entries)
        files.replace(self.path, data)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        if self._fd is not None:
            os.close(self._fd)
        self._fd = fd
        self.size = self._snapshot_size = len(data)
        files.sync_directory(self.directory)

    # --- appending ---------------------------------------------------------------------

    def append(self, entries: list[Entry]) -> None:
        """Queue ``entries`` for the next commit; never raises (an entry that cannot be
        encoded is logged and left out, alone)."""
        if entries and self._broken is None:
            payload = encoding.encoded(self._encoder, entries)
            if payload is not None:
                self._pending.append(payload)
                self._wake.set()

    def flushed(self) -> asyncio.Future[None]:
        """Resolves once everything appended so far is on disk (or raises
        ``JournalError`` if it could not be written)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._broken is not None:
            future.set_exception(JournalError(f"the journal cannot be written: {self.problem}"))
            return future
        self._waiters.append(future)
        self._wake.set()
        return future

    def fail(self, error: BaseException) -> None:
        """The writer has died: fail every wait, now and from now on (nothing would ever
        resolve them otherwise)."""
        if self._broken is None:
            self._broken = error
            self.problem = f"the journal writer stopped ({type(error).__name__}: {error})"
        self._fail_waiters()

    def _fail_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(JournalError(f"the journal cannot be written: {self.problem}"))

    async def _write_loop(self) -> None:
        while True:
            if self._compact_soon or self.size > max(self.compact_bytes, 2 * self._snapshot_size):
                await self._compact()
            await self._next_wake()
            while (self._pending or self._waiters) and await self._commit():
                pass
            if self._closing:
                return

    async def _next_wake(self) -> None:
        """Wait for work; while a failed write's data waits, retry it now and then."""
        if self.problem is not None and self._pending and not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), RETRY_INTERVAL)
        else:
            await self._wake.wait()
        self._wake.clear()

    async def _commit(self) -> bool:
        """Write what is pending and tell its waiters; ``False`` if the write failed (the
        data stays pending, ahead of anything newer, for the next commit to retry)."""
        payloads, self._pending = self._pending, []
        told = len(self._waiters)  # later ones wait for data appended after this commit
        error: BaseException | None = self._broken
        if payloads and error is None:
            try:
                await asyncio.to_thread(self._write, payloads)
                self.commits += 1
                self.problem = None
                if self.on_commit is not None:
                    self.on_commit(self.size, len(payloads))
            except OSError as exc:
                error = exc
                self._pending[:0] = payloads
                self.problem = str(exc)
                log.error("journal write failed", path=str(self.path), error=str(exc))
        waiters, self._waiters = self._waiters[:told], self._waiters[told:]
        for waiter in waiters:
            if waiter.done():
                continue
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(JournalError(f"the journal cannot be written: {error}"))
        return error is None

    def _write(self, payloads: list[bytes]) -> None:
        assert self._fd is not None, "start() opens the file"
        data = bytearray()
        for payload in payloads:
            data += frames.frame(payload, self.size + len(data))
        try:
            files.write_all(self._fd, bytes(data))
            files.sync_data(self._fd)
        except OSError:
            try:  # cut the partial frame, so later frames are not lost behind it on replay
                os.ftruncate(self._fd, self.size)
            except OSError as exc:
                self._broken = exc
            raise
        self.size += len(data)

    async def _compact(self) -> None:
        assert self._snapshot is not None
        self._compact_soon = False
        entries = self._snapshot()  # taken between commits: nothing appended is missing
        before = self.size
        try:
            await asyncio.to_thread(self.rewrite, entries)
        except OSError as exc:
            log.error(
                "journal compaction failed; appending goes on and it is tried again later",
                path=str(self.path),
                error=str(exc),
            )
            self._snapshot_size = self.size  # again once it has doubled
            return
        if self.on_rewrite is not None:
            self.on_rewrite(self.size)
        log.info("journal compacted", path=str(self.path), before=before, after=self.size)

    # --- stop ----------------------------------------------------------------------------

    async def close(self) -> None:
        """Write what is pending, then release the files."""
        if self._writer is not None:
            self._closing = True
            self._wake.set()
            await asyncio.gather(self._writer, return_exceptions=True)
            self._writer = None
        if self._broken is None:  # a request answered late must not wait for ever
            self._broken = JournalError("closed")
            self.problem = "the journal is closed"
        self._fail_waiters()
        self.close_files()

    def close_files(self) -> None:
        for fd in (self._fd, self._lock_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._lock_fd = None
